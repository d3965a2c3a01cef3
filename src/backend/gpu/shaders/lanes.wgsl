// lanes (sources.rs appends it to the kernels whose reductions are trees: layernorm,
// matmul_gemv_ln, attention, lm_head, argmax): how a tree's smallest strides are taken. A tree
// halves its stride from the widest down to 1; the strides of SUBGROUP lanes and more go
// through workgroup memory, each after a barrier, and those below it between the lanes of a
// subgroup, by shuffles, with no barrier. As written here the device has no subgroups for the
// kernels (SUBGROUP = 1): every stride goes through workgroup memory, so `lane_f32` and
// `lane_u32` are never called (the kernels stay one source). Where it has them, sources.rs puts
// lanes_subgroup.wgsl's in their place and SUBGROUP is its smallest subgroup size, a power of
// two. Either way each sum adds the same pairs in the same order, so the results are bit for
// bit the same.

override SUBGROUP: u32 = 1u;

fn lane_f32(v: f32, mask: u32) -> f32 {
    return v;
}

fn lane_u32(v: u32, mask: u32) -> u32 {
    return v;
}
