// matmul_gemv: out = epilogue(x @ w + b), shaped for decode (T = 1), correct for any T.
//
// One output row is a vector-matrix product, and decode is bound by reading w once. w is stored
// (K, N): a workgroup owns 8 consecutive columns (32 bytes of each w row, one memory sector) and
// its 32 thread rows split K 32 ways, each keeping four w rows' loads in flight, so a thread's
// chain of dependent loads is K / 128 long and a 768-column matrix has 96 workgroups. (64 columns
// by 4 slices, one load at a time, left a GPU with 132 SMs 12 to 48 workgroups waiting on chains
// of K / 4 loads: 8 ms per GPT-2-124M token on an H200.) The 32 partial sums of a column are
// added in workgroup memory by a tree, in a fixed order.
// Epilogue (dims.epilogue): 0 = bias only, 1 = bias then GELU (tanh form), 2 = bias then add
// into out (the residual stream). The same as matmul_tiled.wgsl, so the two share bind groups.
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   K, N, epilogue
//   2 x           storage, read        (n_ctx, K), first T rows used
//   3 w           storage, read        (K, N)
//   4 b           storage, read        (N,)
//   5 out         storage, read_write  (n_ctx, N), first T rows written
// Workgroup: 8×32 threads (columns × K slices).  Grid: (ceil(N / 8), T, 1).

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    K: u32,
    N: u32,
    epilogue: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> b: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const COLS: u32 = 8u;
const SLICES: u32 = 32u;
var<workgroup> partial: array<array<f32, COLS>, SLICES>;

// The one read of w, weight (k, col) of (K, N): the f16 and q8 builds rewrite it (kernels.rs).
fn weight(k: u32, col: u32, N: u32) -> f32 {
    return w[k * N + col];
}

// GPT-2's GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). The argument is clamped because
// some tanh implementations return NaN for huge inputs; tanh(±15) is ±1 in f32.
fn gelu_tanh(v: f32) -> f32 {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return 0.5 * v * (1.0 + tanh(clamp(u, -15.0, 15.0)));
}

@compute @workgroup_size(8, 32)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let K = dims.K;
    let N = dims.N;
    let row = wid.y;
    let col = wid.x * COLS + lid.x;
    // With q8 weights, the row's block scales first (act_q8.wgsl).
    if (Q8_ACT && row < run.T) {
        for (var blk = li; blk * 32u < K; blk = blk + 256u) {
            var amax = 0.0;
            for (var k = blk * 32u; k < min(blk * 32u + 32u, K); k = k + 1u) {
                amax = max(amax, abs(x[row * K + k]));
            }
            act_block(blk, amax);
        }
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }
    var acc = 0.0;
    if (row < run.T && col < N) {
        acc = dot_slice(row * K, K, N, col, lid.y);
    }
    partial[lid.y][lid.x] = acc;
    workgroupBarrier();
    for (var s = SLICES / 2u; s > 0u; s = s / 2u) {
        if (lid.y < s) {
            partial[lid.y][lid.x] = partial[lid.y][lid.x] + partial[lid.y + s][lid.x];
        }
        workgroupBarrier();
    }
    if (lid.y != 0u || row >= run.T || col >= N) {
        return;
    }
    let i = row * N + col;
    let y = partial[0][lid.x] + b[col];
    switch dims.epilogue {
        case 1u: { out[i] = gelu_tanh(y); }
        case 2u: { out[i] = out[i] + y; }
        default: { out[i] = y; }
    }
}

// x[xr + k] · w[k, col] summed over k = slice, slice + 32, ...: four rows a step.
fn dot_slice(xr: u32, K: u32, N: u32, col: u32, slice: u32) -> f32 {
    var a = vec4<f32>(0.0);
    var k = slice;
    for (; k + 3u * SLICES < K; k = k + 4u * SLICES) {
        let xs = vec4<f32>(
            act(x[xr + k], k),
            act(x[xr + k + SLICES], k + SLICES),
            act(x[xr + k + 2u * SLICES], k + 2u * SLICES),
            act(x[xr + k + 3u * SLICES], k + 3u * SLICES),
        );
        let ws = vec4<f32>(
            weight(k, col, N),
            weight(k + SLICES, col, N),
            weight(k + 2u * SLICES, col, N),
            weight(k + 3u * SLICES, col, N),
        );
        a = a + xs * ws;
    }
    for (; k < K; k = k + SLICES) {
        a.x = a.x + act(x[xr + k], k) * weight(k, col, N);
    }
    return (a.x + a.y) + (a.z + a.w);
}
