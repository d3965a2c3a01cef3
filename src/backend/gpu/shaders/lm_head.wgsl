// lm_head: logits[i, chunk_start + r] = xn[i, :] · wte[r, :], the tied output head over one vocab
// chunk of wte (the whole of wte when it fits one storage binding), for the rows i of xn.
//
// A decode step or a prompt uses row 0 only: ln_f of the last position (layernorm.wgsl with
// last_only = 1). A verification pass uses every row, ln_f of each position. wte is stored
// (V, C), so each logit is a dot product along a contiguous row: the 32 lanes of a workgroup
// row stride through it together (coalesced), then add their partial sums in workgroup memory.
//
// Bindings (group 0):
//   0 dims: Dims  uniform   C, chunk_start, chunk_rows, V
//   1 xn          storage, read        (n_ctx, C), the first grid.y rows used
//   2 wte         storage, read        (chunk_rows, C)
//   3 logits      storage, read_write  (MAX_VERIFY, V), columns chunk_start .. +chunk_rows
//                                      of the first grid.y rows written
// Workgroup: 32×8 threads (lanes along C × rows).  Grid: (ceil(chunk_rows / 8), rows of xn, 1).

struct Dims {
    C: u32,
    chunk_start: u32,
    chunk_rows: u32,
    V: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> xn: array<f32>;
@group(0) @binding(2) var<storage, read> wte: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
var<workgroup> partial: array<array<f32, LANES>, ROWS>;

@compute @workgroup_size(32, 8)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let C = dims.C;
    let r = wid.x * ROWS + lid.y;
    let i = wid.y; // the row of xn
    // With q8 weights, the row's block scales first (act_q8.wgsl).
    if (Q8_ACT) {
        for (var blk = li; blk * 32u < C; blk = blk + LANES * ROWS) {
            var amax = 0.0;
            for (var c = blk * 32u; c < min(blk * 32u + 32u, C); c = c + 1u) {
                amax = max(amax, abs(xn[i * C + c]));
            }
            act_block(blk, amax);
        }
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }
    var s = 0.0;
    if (r < dims.chunk_rows) {
        for (var c = lid.x; c < C; c = c + LANES) {
            s = s + act(xn[i * C + c], c) * wte[r * C + c];
        }
    }
    partial[lid.y][lid.x] = s;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
        if (lid.x < stride) {
            partial[lid.y][lid.x] = partial[lid.y][lid.x] + partial[lid.y][lid.x + stride];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u && r < dims.chunk_rows) {
        logits[i * dims.V + dims.chunk_start + r] = partial[lid.y][0];
    }
}
