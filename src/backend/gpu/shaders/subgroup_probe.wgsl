// subgroup_probe: whether this device's subgroups are what lanes_subgroup.wgsl counts on. For
// every lane of a workgroup shaped as lm_head's (32 × 8): the subgroup has at least SUBGROUP
// lanes, and for each mask below SUBGROUP the shuffle brings the value of the lane whose
// local_invocation_index is this one's XOR the mask (WGSL does not promise how subgroups are
// numbered within a workgroup; every device seen numbers them so). context.rs runs it once per
// device and uses subgroups only if every lane says yes. (No `enable subgroups;`: naga, which
// compiles it natively, takes the builtins without it and refuses the directive; wgpu passes no
// subgroups to a browser yet.)
//
// Bindings (group 0):
//   0 ok          storage, read_write  (256,) f32: 1 where the lane's shuffles held, else 0
// Workgroup: 32×8 threads.  Grid: (1, 1, 1).

@group(0) @binding(0) var<storage, read_write> ok: array<f32>;

override SUBGROUP: u32 = 1u;

@compute @workgroup_size(32, 8)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_size) size: u32) {
    var held = size >= SUBGROUP;
    for (var m = 1u; m < SUBGROUP; m = m * 2u) {
        held = held && subgroupShuffleXor(li, m) == (li ^ m);
    }
    ok[li] = select(0.0, 1.0, held);
}
