// lanes_subgroup (sources.rs puts it in place of lanes.wgsl where the device has subgroups):
// the value of the lane whose index in the workgroup is this one's XOR `mask` (mask below
// SUBGROUP, the device's smallest subgroup size: the two lanes share a subgroup, which
// context.rs checks on every device before the kernels use it).

override SUBGROUP: u32 = 1u;

fn lane_f32(v: f32, mask: u32) -> f32 {
    return subgroupShuffleXor(v, mask);
}

fn lane_u32(v: u32, mask: u32) -> u32 {
    return subgroupShuffleXor(v, mask);
}
