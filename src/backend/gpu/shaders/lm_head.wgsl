// lm_head: logits[chunk_start + r] = xn[0, :] · wte[r, :], the tied output head over one vocab
// chunk of wte (the whole of wte when it fits one storage binding).
//
// xn row 0 holds ln_f of the last position (layernorm.wgsl with last_only = 1). wte is stored
// (V, C), so each logit is a dot product along a contiguous row: the 32 lanes of a workgroup
// row stride through it together (coalesced), then add their partial sums in workgroup memory.
//
// Bindings (group 0):
//   0 dims: Dims  uniform   C, chunk_start, chunk_rows
//   1 xn          storage, read        (n_ctx, C), row 0 used
//   2 wte         storage, read        (chunk_rows, C)
//   3 logits      storage, read_write  (V,), rows chunk_start .. chunk_start+chunk_rows written
// Workgroup: 32×8 threads (lanes along C × rows).  Grid: (ceil(chunk_rows / 8), 1, 1).

struct Dims {
    C: u32,
    chunk_start: u32,
    chunk_rows: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> xn: array<f32>;
@group(0) @binding(2) var<storage, read> wte: array<f32>;
@group(0) @binding(3) var<storage, read_write> logits: array<f32>;

const LANES: u32 = 32u;
const ROWS: u32 = 8u;
var<workgroup> partial: array<array<f32, LANES>, ROWS>;

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let C = dims.C;
    let r = wid.x * ROWS + lid.y;
    var s = 0.0;
    if (r < dims.chunk_rows) {
        for (var c = lid.x; c < C; c = c + LANES) {
            s = s + xn[c] * wte[r * C + c];
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
        logits[dims.chunk_start + r] = partial[lid.y][0];
    }
}
