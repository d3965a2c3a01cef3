// matmul_gemv_ln: out = epilogue(layernorm(x) @ w + b), matmul_gemv with the LayerNorm before it
// fused in: decode's ln_1 → c_attn and ln_2 → c_fc in one dispatch each instead of two.
//
// Each workgroup first takes its row's mean and variance (two passes, as layernorm.wgsl, with
// the same tree sums over 256 threads), then reads x normalised on the fly:
// (x − mean) · rstd · weight + bias, the expression layernorm.wgsl writes. The row is a few
// thousand floats, so recomputing its statistics in every workgroup of the row costs less than
// a dispatch and a round trip through memory.
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   K, N, epilogue, eps
//   2 x           storage, read        (n_ctx, K): the residual stream, first T rows used
//   3 w           storage, read        (K, N)
//   4 b           storage, read        (N,)
//   5 ln_w        storage, read        (K,)
//   6 ln_b        storage, read        (K,)
//   7 out         storage, read_write  (n_ctx, N), first T rows written
// Workgroup: 8×32 threads (columns × K slices, as matmul_gemv.wgsl).  Grid: (ceil(N / 8), T, 1).

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
    eps: f32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> b: array<f32>;
@group(0) @binding(5) var<storage, read> ln_w: array<f32>;
@group(0) @binding(6) var<storage, read> ln_b: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

const COLS: u32 = 8u;
const SLICES: u32 = 32u;
const WG: u32 = 256u;
var<workgroup> partial: array<array<f32, COLS>, SLICES>;
var<workgroup> tree: array<f32, WG>;

// Sum of `v` over the workgroup; every thread gets the result (layernorm.wgsl's tree).
fn workgroup_sum(v: f32, lid: u32) -> f32 {
    tree[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            tree[lid] = tree[lid] + tree[lid + s];
        }
        workgroupBarrier();
    }
    let total = tree[0];
    workgroupBarrier();
    return total;
}

// The one read of w, weight (k, col) of (K, N): the f16 and q8 builds rewrite it (kernels.rs).
fn weight(k: u32, col: u32, N: u32) -> f32 {
    return w[k * N + col];
}

// x[base + k] normalised: (x − mean) · rstd · weight + bias, as layernorm.wgsl writes it.
fn normed(base: u32, k: u32, mean: f32, rstd: f32) -> f32 {
    return (x[base + k] - mean) * rstd * ln_w[k] + ln_b[k];
}

// GPT-2's GELU, as matmul_gemv.wgsl.
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
    // Uniform per workgroup, so returning here keeps the barriers below in uniform control flow.
    if (row >= run.T) {
        return;
    }
    let base = row * K;
    var s = 0.0;
    for (var k = li; k < K; k = k + WG) {
        s = s + x[base + k];
    }
    let mean = workgroup_sum(s, li) / f32(K);
    var sq = 0.0;
    for (var k = li; k < K; k = k + WG) {
        let d = x[base + k] - mean;
        sq = sq + d * d;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, li) / f32(K) + dims.eps);
    // With q8 weights, the normalised row's block scales (act_q8.wgsl).
    if (Q8_ACT) {
        for (var blk = li; blk * 32u < K; blk = blk + WG) {
            var amax = 0.0;
            for (var k = blk * 32u; k < min(blk * 32u + 32u, K); k = k + 1u) {
                amax = max(amax, abs(normed(base, k, mean, rstd)));
            }
            act_block(blk, amax);
        }
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }

    let col = wid.x * COLS + lid.x;
    var acc = 0.0;
    if (col < N) {
        // As matmul_gemv.wgsl's dot_slice: four w rows' loads in flight per step.
        var a = vec4<f32>(0.0);
        var k = lid.y;
        for (; k + 3u * SLICES < K; k = k + 4u * SLICES) {
            let xs = vec4<f32>(
                act(normed(base, k, mean, rstd), k),
                act(normed(base, k + SLICES, mean, rstd), k + SLICES),
                act(normed(base, k + 2u * SLICES, mean, rstd), k + 2u * SLICES),
                act(normed(base, k + 3u * SLICES, mean, rstd), k + 3u * SLICES),
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
            a.x = a.x + act(normed(base, k, mean, rstd), k) * weight(k, col, N);
        }
        acc = (a.x + a.y) + (a.z + a.w);
    }
    partial[lid.y][lid.x] = acc;
    workgroupBarrier();
    for (var s = SLICES / 2u; s > 0u; s = s / 2u) {
        if (lid.y < s) {
            partial[lid.y][lid.x] = partial[lid.y][lid.x] + partial[lid.y + s][lid.x];
        }
        workgroupBarrier();
    }
    if (lid.y != 0u || col >= N) {
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
