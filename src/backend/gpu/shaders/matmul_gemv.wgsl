// matmul_gemv: out = epilogue(x @ w + b), shaped for decode (T = 1), correct for any T.
//
// One output row is a vector-matrix product, and decode is bound by reading w once. w is stored
// (K, N): a workgroup owns 8 consecutive columns (32 bytes of each w row, one memory sector) and
// its 32 thread rows split K 32 ways, each keeping four w rows' loads in flight, so a thread's
// chain of dependent loads is K / 128 long and a 768-column matrix has 96 workgroups. (64 columns
// by 4 slices, one load at a time, left a GPU with 132 SMs 12 to 48 workgroups waiting on chains
// of K / 4 loads: 8 ms per GPT-2-124M token on an H200.) The 32 partial sums of a column are
// added in workgroup memory by a tree, in a fixed order. A workgroup takes up to ROWS_PER rows of
// x (a batch's decode step: one row per sequence), each weight it reads serving all of them, so
// a step of B sequences reads w ceil(B / ROWS_PER) times rather than B times. A row's sums are
// taken in the same order whichever rows share its workgroup, so each row's output is bit for
// bit that of the row alone.
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
// Workgroup: 8×32 threads (columns × K slices).  Grid: (ceil(N / 8), ceil(T / BATCH_ROWS), 1).

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
const ROWS_PER: u32 = 4u; // the most rows of x a workgroup takes (kernels.rs: GEMV_GROUP_ROWS)
// Rows of x this pipeline's workgroups take: 1 (one row: no code for more), or ROWS_PER (a
// batch's step). kernels.rs builds both and dispatches by the rows of the pass.
override BATCH_ROWS: u32 = 1u;
const ACT_BLOCKS: u32 = 256u; // rows of up to 8192 values (plan.rs checks)
var<workgroup> partial: array<array<array<f32, COLS>, SLICES>, BATCH_ROWS>;

// The one read of w, weight (k, col) of (K, N): the f16 and q8 builds rewrite it (sources.rs).
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
    let r0 = wid.y * BATCH_ROWS; // the workgroup's first row
    let nr = min(min(BATCH_ROWS, ROWS_PER), run.T - min(r0, run.T)); // and how many it takes
    let col = wid.x * COLS + lid.x;
    // With q8 weights, the block scales of each of its rows first (act_q8.wgsl).
    if (Q8_ACT) {
        for (var p = 0u; p < nr; p = p + 1u) {
            for (var blk = li; blk * 32u < K; blk = blk + 256u) {
                var amax = 0.0;
                for (var k = blk * 32u; k < min(blk * 32u + 32u, K); k = k + 1u) {
                    amax = max(amax, abs(x[(r0 + p) * K + k]));
                }
                act_block(p, blk, amax);
            }
        }
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }
    // Row p's sum in component p (0 for a column past N). Every thread calls it: gemv_packed.wgsl's
    // synchronises the workgroup.
    let none = vec2<f32>(0.0); // matmul_gemv_ln.wgsl's LayerNorm statistics: none here
    let acc = dot_slice(r0, nr, K, N, col, lid.y, li, none, none, none, none);
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

// Value k of x's row from `base`, as gemv_dot.wgsl reads it (st: matmul_gemv_ln.wgsl's
// statistics, unused).
fn input(base: u32, k: u32, st: vec2<f32>) -> f32 {
    return x[base + k];
}
