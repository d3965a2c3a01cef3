// matmul_gemv_ln: out = epilogue(layernorm(x) @ w + b), matmul_gemv with the LayerNorm before it
// fused in: decode's ln_1 → c_attn and ln_2 → c_fc in one dispatch each instead of two.
//
// Each workgroup first takes the mean and variance of each of its rows (up to ROWS_PER, as
// matmul_gemv.wgsl: each weight read once for all of them; two passes, as layernorm.wgsl, with
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
// Workgroup: 8×32 threads (columns × K slices, as matmul_gemv.wgsl).
// Grid: (ceil(N / 8), ceil(T / BATCH_ROWS), 1).

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
const ROWS_PER: u32 = 4u; // the most rows of x a workgroup takes, as matmul_gemv.wgsl
// Rows of x this pipeline's workgroups take: 1 (one row: no code for more), or ROWS_PER (a
// batch's step). kernels.rs builds both and dispatches by the rows of the pass.
override BATCH_ROWS: u32 = 1u;
const ACT_BLOCKS: u32 = 256u; // rows of up to 8192 values (plan.rs checks)
const WG: u32 = 256u;
var<workgroup> partial: array<array<array<f32, COLS>, SLICES>, BATCH_ROWS>;
// Each row's statistics: workgroup_sum.wgsl's tree (after this file), as layernorm.wgsl's.

// The one read of w, weight (k, col) of (K, N): the f16 and q8 builds rewrite it (sources.rs).
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
    let r0 = wid.y * BATCH_ROWS; // the workgroup's first row
    let nr = min(min(BATCH_ROWS, ROWS_PER), run.T - min(r0, run.T)); // and how many it takes (uniform)
    // Each row's (mean, rstd) and, with q8 weights, its normalised values' block scales; a
    // variable per row (an array indexed in a loop may live in slower memory).
    let st0 = row_stats(r0 * K, K, 0u, li);
    var st1 = vec2<f32>(0.0);
    var st2 = vec2<f32>(0.0);
    var st3 = vec2<f32>(0.0);
    if (BATCH_ROWS > 1u && nr > 1u) { st1 = row_stats((r0 + 1u) * K, K, 1u, li); }
    if (BATCH_ROWS > 1u && nr > 2u) { st2 = row_stats((r0 + 2u) * K, K, 2u, li); }
    if (BATCH_ROWS > 1u && nr > 3u) { st3 = row_stats((r0 + 3u) * K, K, 3u, li); }
    if (Q8_ACT) {
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }

    let col = wid.x * COLS + lid.x;
    // Row p's sum in component p (0 for a column past N). Every thread calls it: gemv_packed.wgsl's
    // synchronises the workgroup.
    let acc = dot_slice(r0, nr, K, N, col, lid.y, li, st0, st1, st2, st3);
    partial[0][lid.y][lid.x] = acc.x;
    if (BATCH_ROWS > 1u) {
        partial[slot(1u)][lid.y][lid.x] = acc.y;
        partial[slot(2u)][lid.y][lid.x] = acc.z;
        partial[slot(3u)][lid.y][lid.x] = acc.w;
    }
    workgroupBarrier();
    for (var s = SLICES / 2u; s > 0u; s = s / 2u) {
        if (lid.y < s) {
            for (var p = 0u; p < nr; p = p + 1u) {
                partial[p][lid.y][lid.x] = partial[p][lid.y][lid.x] + partial[p][lid.y + s][lid.x];
            }
        }
        workgroupBarrier();
    }
    if (lid.y != 0u || col >= N) {
        return;
    }
    for (var p = 0u; p < nr; p = p + 1u) {
        let i = (r0 + p) * N + col;
        let y = partial[p][0][lid.x] + b[col];
        switch dims.epilogue {
            case 1u: { out[i] = gelu_tanh(y); }
            case 2u: { out[i] = out[i] + y; }
            default: { out[i] = y; }
        }
    }
}

// The mean and rstd of the row of x from `base` (two passes, as layernorm.wgsl), and with q8
// weights the block scales of its normalised values as the workgroup's row p (act_q8.wgsl).
// Called in uniform control flow: it synchronises the workgroup.
fn row_stats(base: u32, K: u32, p: u32, li: u32) -> vec2<f32> {
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
    if (Q8_ACT) {
        for (var blk = li; blk * 32u < K; blk = blk + WG) {
            var amax = 0.0;
            for (var k = blk * 32u; k < min(blk * 32u + 32u, K); k = k + 1u) {
                amax = max(amax, abs(normed(base, k, mean, rstd)));
            }
            act_block(p, blk, amax);
        }
    }
    return vec2<f32>(mean, rstd);
}

// Value k of x's row from `base` normalised (st: the row's (mean, rstd)), as gemv_dot.wgsl
// reads it.
fn input(base: u32, k: u32, st: vec2<f32>) -> f32 {
    return normed(base, k, st.x, st.y);
}
