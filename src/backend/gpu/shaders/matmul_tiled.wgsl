// matmul_tiled: out = epilogue(x @ w + b) for the T new rows; the prefill path (T > 1).
//
// w is a transformers Conv1D weight, stored (K, N) = (in, out), so no transpose is needed.
// Each workgroup computes one 16×16 tile of out, staging 16×16 tiles of x and w in workgroup
// memory so every value read from global memory is used 16 times. Out-of-range tile entries
// are loaded as zeros, so any T, K, N work.
// Epilogue (dims.epilogue): 0 = bias only (c_attn), 1 = bias then GELU, tanh form (mlp.c_fc),
// 2 = bias then add into out, the residual stream (attn.c_proj, mlp.c_proj).
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   K, N, epilogue
//   2 x           storage, read        (n_ctx, K), first T rows used
//   3 w           storage, read        (K, N)
//   4 b           storage, read        (N,)
//   5 out         storage, read_write  (n_ctx, N), first T rows written
// Workgroup: 16×16 threads, one per output element.  Grid: (ceil(N / 16), ceil(T / 16), 1).

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

const TILE: u32 = 16u;
var<workgroup> x_tile: array<array<f32, TILE>, TILE>; // [row][k]
var<workgroup> w_tile: array<array<f32, TILE>, TILE>; // [k][col]

// GPT-2's GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). The argument is clamped because
// some tanh implementations return NaN for huge inputs; tanh(±15) is ±1 in f32.
fn gelu_tanh(v: f32) -> f32 {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return 0.5 * v * (1.0 + tanh(clamp(u, -15.0, 15.0)));
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let K = dims.K;
    let N = dims.N;
    let row = wid.y * TILE + lid.y;
    let col = wid.x * TILE + lid.x;
    var acc = 0.0;
    for (var k0 = 0u; k0 < K; k0 = k0 + TILE) {
        var xv = 0.0;
        if (row < run.T && k0 + lid.x < K) {
            xv = x[row * K + k0 + lid.x];
        }
        x_tile[lid.y][lid.x] = xv;
        var wv = 0.0;
        if (k0 + lid.y < K && col < N) {
            wv = w[(k0 + lid.y) * N + col];
        }
        w_tile[lid.y][lid.x] = wv;
        workgroupBarrier();
        for (var k = 0u; k < TILE; k = k + 1u) {
            acc = acc + x_tile[lid.y][k] * w_tile[k][lid.x];
        }
        workgroupBarrier();
    }
    if (row >= run.T || col >= N) {
        return;
    }
    let i = row * N + col;
    let y = acc + b[col];
    switch dims.epilogue {
        case 1u: { out[i] = gelu_tanh(y); }
        case 2u: { out[i] = out[i] + y; }
        default: { out[i] = y; }
    }
}
