// matmul_gemv: out = epilogue(x @ w + b), shaped for decode (T = 1), correct for any T.
//
// One output row is a vector-matrix product. w is stored (K, N), so the 64 threads of a
// workgroup row read 64 consecutive columns of one w row (coalesced); the 4 thread rows split
// K four ways and their partial sums are added in workgroup memory.
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
// Workgroup: 64×4 threads (columns × K slices).  Grid: (ceil(N / 64), T, 1).

struct Step {
    T: u32,
    pos: u32,
    _pad0: u32,
    _pad1: u32,
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

const COLS: u32 = 64u;
const SLICES: u32 = 4u;
var<workgroup> partial: array<array<f32, COLS>, SLICES>;

// GPT-2's GELU, 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). The argument is clamped because
// some tanh implementations return NaN for huge inputs; tanh(±15) is ±1 in f32.
fn gelu_tanh(v: f32) -> f32 {
    let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
    return 0.5 * v * (1.0 + tanh(clamp(u, -15.0, 15.0)));
}

@compute @workgroup_size(64, 4)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let K = dims.K;
    let N = dims.N;
    let row = wid.y;
    let col = wid.x * COLS + lid.x;
    var acc = 0.0;
    if (row < run.T && col < N) {
        for (var k = lid.y; k < K; k = k + SLICES) {
            acc = acc + x[row * K + k] * w[k * N + col];
        }
    }
    partial[lid.y][lid.x] = acc;
    workgroupBarrier();
    if (lid.y != 0u || row >= run.T || col >= N) {
        return;
    }
    var sum = 0.0;
    for (var s = 0u; s < SLICES; s = s + 1u) {
        sum = sum + partial[s][lid.x];
    }
    let i = row * N + col;
    let y = sum + b[col];
    switch dims.epilogue {
        case 1u: { out[i] = gelu_tanh(y); }
        case 2u: { out[i] = out[i] + y; }
        default: { out[i] = y; }
    }
}
