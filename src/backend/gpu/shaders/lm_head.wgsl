// lm_head: logits[i, chunk_start + r] = xn[i, :] · wte[r, :], the tied output head over one vocab
// chunk of wte (the whole of wte when it fits one storage binding), for the rows i of xn.
//
// A decode step of one sequence or a prompt uses row 0 only: ln_f of the last position
// (layernorm.wgsl with last_only = 1). A batch's decode step and a verification pass use every
// row, ln_f of each (run.head rows). wte is stored (V, C), so each logit is a dot product along
// a contiguous row: the 32 lanes of a workgroup row stride through it together (coalesced), then
// add their partial sums by a tree (workgroup memory, subgroup shuffles where the device has
// them: lanes.wgsl). A workgroup takes up to POS rows of xn, so each
// weight it reads serves all of them: a batch of POS sequences reads wte once per step, not POS
// times. Each logit is summed in the same order whichever rows share its workgroup (a lane's
// products in order of c, then the same tree), so a row's logits are bit for bit those of the
// row alone.
//
// Bindings (group 0):
//   0 run: Step   uniform   head: the rows of xn to take
//   1 dims: Dims  uniform   C, chunk_start, chunk_rows, V
//   2 xn          storage, read        (n_ctx, C), the first run.head rows used
//   3 wte         storage, read        (chunk_rows, C)
//   4 logits      storage, read_write  (MAX_VERIFY, V), columns chunk_start .. +chunk_rows
//                                      of the first run.head rows written
// Workgroup: 32×8 threads (lanes along C × vocab rows).
// Grid: (ceil(chunk_rows / 8), ceil(run.head / BATCH_ROWS), 1).

struct Step {
    T: u32,
    head: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    C: u32,
    chunk_start: u32,
    chunk_rows: u32,
    V: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> xn: array<f32>;
@group(0) @binding(3) var<storage, read> wte: array<f32>;
@group(0) @binding(4) var<storage, read_write> logits: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
const POS: u32 = 8u; // the most rows of xn a workgroup takes (kernels.rs: HEAD_POSITIONS)
// Rows of xn this pipeline's workgroups take: 1 (one row: no code for more), or POS (a batch's
// step, a verification). kernels.rs builds both and dispatches by the rows of the pass.
override BATCH_ROWS: u32 = 1u;
const ACT_BLOCKS: u32 = 64u; // C ≤ 2048 (plan.rs checks)
var<workgroup> partial: array<array<array<f32, LANES>, ROWS>, BATCH_ROWS>;

@compute @workgroup_size(32, 8)
fn main(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let C = dims.C;
    let r = wid.x * ROWS + lid.y;
    let i0 = wid.y * BATCH_ROWS; // the workgroup's first row of xn
    let np = min(min(BATCH_ROWS, POS), run.head - min(i0, run.head)); // and how many it takes
    let more = BATCH_ROWS > 1u; // false: the guards below are no code
    // With q8 weights, the block scales of each of its rows first (act_q8.wgsl).
    if (Q8_ACT) {
        for (var p = 0u; p < np; p = p + 1u) {
            for (var blk = li; blk * 32u < C; blk = blk + LANES * ROWS) {
                var amax = 0.0;
                for (var c = blk * 32u; c < min(blk * 32u + 32u, C); c = c + 1u) {
                    amax = max(amax, abs(xn[(i0 + p) * C + c]));
                }
                act_block(p, blk, amax);
            }
        }
        workgroupBarrier(); // uniform: Q8_ACT is a pipeline constant
    }
    // Row p's sum in s[p] (0 past the chunk's rows). Every thread calls it: lm_head_packed.wgsl's
    // synchronises the workgroup.
    let s = head_sums(r, i0 * C, np, C, lid.x, li);
    // The 32 lanes' sums of each row of xn added by a tree: its strides of SUBGROUP and more
    // through workgroup memory, those below it by shuffles (lanes.wgsl, `logit`); with
    // subgroups of 32 or more, no workgroup memory at all.
    let lanes = min(SUBGROUP, LANES);
    if (lanes < LANES) { // uniform: a pipeline constant
        partial[0][lid.y][lid.x] = s[0];
        if (more) {
            partial[slot(1u)][lid.y][lid.x] = s[1];
            partial[slot(2u)][lid.y][lid.x] = s[2];
            partial[slot(3u)][lid.y][lid.x] = s[3];
            partial[slot(4u)][lid.y][lid.x] = s[4];
            partial[slot(5u)][lid.y][lid.x] = s[5];
            partial[slot(6u)][lid.y][lid.x] = s[6];
            partial[slot(7u)][lid.y][lid.x] = s[7];
        }
        workgroupBarrier();
        for (var stride = LANES / 2u; stride >= lanes; stride = stride / 2u) {
            if (lid.x < stride) {
                for (var p = 0u; p < np; p = p + 1u) {
                    partial[p][lid.y][lid.x] = partial[p][lid.y][lid.x] + partial[p][lid.y][lid.x + stride];
                }
            }
            workgroupBarrier();
        }
    }
    logit(0u, s[0], np, lanes, lid, r, i0);
    if (more) {
        logit(1u, s[1], np, lanes, lid, r, i0);
        logit(2u, s[2], np, lanes, lid, r, i0);
        logit(3u, s[3], np, lanes, lid, r, i0);
        logit(4u, s[4], np, lanes, lid, r, i0);
        logit(5u, s[5], np, lanes, lid, r, i0);
        logit(6u, s[6], np, lanes, lid, r, i0);
        logit(7u, s[7], np, lanes, lid, r, i0);
    }
}

// Row i0 + p of xn's logit for vocab row r (none past np: uniform, as the shuffles need), from
// the lane's sum v: when lanes < LANES the tree's strides from lanes up are in partial already;
// those below lanes by shuffles; lane 0 writes it. (Each row's sum passed as a value, not an
// array indexed in a loop: such an array may live in slower memory.)
fn logit(p: u32, v: f32, np: u32, lanes: u32, lid: vec3<u32>, r: u32, i0: u32) {
    if (p >= np) {
        return;
    }
    var t = v;
    if (lanes < LANES) {
        t = partial[p][lid.y][lid.x];
    }
    for (var m = lanes / 2u; m > 0u; m = m / 2u) {
        t = t + lane_f32(t, m);
    }
    if (lid.x == 0u && r < dims.chunk_rows) {
        logits[(i0 + p) * dims.V + dims.chunk_start + r] = t;
    }
}

// Vocab row r's dot with each of the np rows of xn from x0 (s[p] for row p), the part of lane
// `lane`: c = lane, lane + 32, …, one weight at a time. One sum per row of xn, each a scalar of
// its own (an array indexed in a loop may live in slower memory); a row past np adds nothing
// (uniform branches). With q8 weights where WGSL has dot4I8Packed, sources.rs puts
// lm_head_packed.wgsl's in its place (li: for it).
fn head_sums(r: u32, x0: u32, np: u32, C: u32, lane: u32, li: u32) -> array<f32, POS> {
    if (r >= dims.chunk_rows) {
        return array<f32, POS>();
    }
    let more = BATCH_ROWS > 1u; // false: the guards below are no code
    var s0 = 0.0;
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var s4 = 0.0;
    var s5 = 0.0;
    var s6 = 0.0;
    var s7 = 0.0;
    for (var c = lane; c < C; c = c + LANES) {
        let wv = wte[r * C + c];
        s0 = s0 + act(xn[x0 + c], c, 0u) * wv;
        if (more && np > 1u) { s1 = s1 + act(xn[x0 + C + c], c, 1u) * wv; }
        if (more && np > 2u) { s2 = s2 + act(xn[x0 + 2u * C + c], c, 2u) * wv; }
        if (more && np > 3u) { s3 = s3 + act(xn[x0 + 3u * C + c], c, 3u) * wv; }
        if (more && np > 4u) { s4 = s4 + act(xn[x0 + 4u * C + c], c, 4u) * wv; }
        if (more && np > 5u) { s5 = s5 + act(xn[x0 + 5u * C + c], c, 5u) * wv; }
        if (more && np > 6u) { s6 = s6 + act(xn[x0 + 6u * C + c], c, 6u) * wv; }
        if (more && np > 7u) { s7 = s7 + act(xn[x0 + 7u * C + c], c, 7u) * wv; }
    }
    return array<f32, POS>(s0, s1, s2, s3, s4, s5, s6, s7);
}
