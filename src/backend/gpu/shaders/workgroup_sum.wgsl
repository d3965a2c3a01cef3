// workgroup_sum (sources.rs appends it to layernorm and matmul_gemv_ln, before lanes.wgsl): the
// sum of a value over the including kernel's WG threads, which every thread gets. A tree: its
// strides of SUBGROUP and more through workgroup memory, those below it by shuffles
// (lanes.wgsl).

var<workgroup> tree: array<f32, WG>;

fn workgroup_sum(v: f32, lid: u32) -> f32 {
    let lanes = min(SUBGROUP, WG);
    tree[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s >= lanes; s = s / 2u) {
        if (lid < s) {
            tree[lid] = tree[lid] + tree[lid + s];
        }
        workgroupBarrier();
    }
    if (lanes > 1u) { // uniform: a pipeline constant
        var t = tree[lid];
        for (var m = lanes / 2u; m > 0u; m = m / 2u) {
            t = t + lane_f32(t, m);
        }
        if (lid == 0u) {
            tree[0] = t;
        }
        workgroupBarrier();
    }
    let total = tree[0];
    workgroupBarrier(); // before tree is reused
    return total;
}
