// quantize: x[t, :] rounded in place, block by block, as the CPU's q8 rounds a product's input
// (`Q8Act`): each block of 32 to -127..=127 with the scale max|x| / 127, each value then
// round(x / scale) · scale. Run before a prompt's tiled products when the weights are q8
// (decode's GEMV kernels round their row themselves: act_q8.wgsl).
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   K (the row's length)
//   2 x           storage, read_write  (n_ctx, K), first T rows rounded
// Workgroup: 64 threads, one block each.  Grid: (ceil(T · ceil(K / 32) / 64), 1, 1).

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    K: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let K = dims.K;
    let blocks = (K + 31u) / 32u;
    if (gid.x >= run.T * blocks) {
        return;
    }
    let row = gid.x / blocks;
    let k0 = (gid.x % blocks) * 32u;
    let end = min(k0 + 32u, K);
    var amax = 0.0;
    for (var k = k0; k < end; k = k + 1u) {
        amax = max(amax, abs(x[row * K + k]));
    }
    let s = amax / 127.0;
    let inv = select(0.0, 1.0 / s, s > 0.0);
    for (var k = k0; k < end; k = k + 1u) {
        let i = row * K + k;
        x[i] = clamp(round(x[i] * inv), -127.0, 127.0) * s;
    }
}
