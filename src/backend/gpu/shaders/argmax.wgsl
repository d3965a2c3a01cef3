// argmax: greedy decoding's choice made on the device. For each row r of the logits, the index of
// its largest value (the first of equal ones, as `sampling::argmax` scans), so a greedy step
// reads back 4 bytes per sequence instead of its vocabulary's logits (201 KB for GPT-2).
//
// Each thread scans a stride of the row keeping the first of its largest, then a tree reduction
// (workgroup memory, then subgroup shuffles where the device has them: lanes.wgsl) keeps, of two
// candidates, the larger, or the earlier of equal ones: the order of the comparisons differs
// from a scan's, the answer does not (for logits without NaN).
//
// Bindings (group 0):
//   0 dims: Dims  uniform   V
//   1 logits      storage, read        (MAX_VERIFY, V), the first grid.x rows read
//   2 chosen      storage, read_write  (MAX_VERIFY,) u32: each row's index
// Workgroup: 256 threads striding one row.  Grid: (rows, 1, 1).

struct Dims {
    V: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> chosen: array<u32>;

const THREADS: u32 = 256u;
const NONE: u32 = 0xffffffffu; // a thread's index before it has seen a value
var<workgroup> best_value: array<f32, THREADS>;
var<workgroup> best_index: array<u32, THREADS>;

// Whether (v, i) goes before (w, j): a larger value, or an equal one at an earlier index; a
// candidate that is none (a thread past the row's end) goes after every value, even -inf.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    if (j == NONE || i == NONE) {
        return j == NONE && i != NONE;
    }
    return v > w || (v == w && i < j);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let V = dims.V;
    let row = wid.x * V;
    var v = 0.0; // (no -inf literal: Chromium's compiler refuses a constant that is not finite)
    var i = NONE;
    for (var c = lid.x; c < V; c = c + THREADS) {
        let x = logits[row + c];
        if (before(x, c, v, i)) {
            v = x;
            i = c;
        }
    }
    best_value[lid.x] = v;
    best_index[lid.x] = i;
    workgroupBarrier();
    // Strides of SUBGROUP and more through workgroup memory, those below it by shuffles
    // (lanes.wgsl): each lane keeps the better of its own and its partner's.
    let lanes = min(SUBGROUP, THREADS);
    for (var stride = THREADS / 2u; stride >= lanes; stride = stride / 2u) {
        if (lid.x < stride) {
            let w = best_value[lid.x + stride];
            let j = best_index[lid.x + stride];
            if (before(w, j, best_value[lid.x], best_index[lid.x])) {
                best_value[lid.x] = w;
                best_index[lid.x] = j;
            }
        }
        workgroupBarrier();
    }
    v = best_value[lid.x];
    i = best_index[lid.x];
    for (var m = lanes / 2u; m > 0u; m = m / 2u) {
        let w = lane_f32(v, m);
        let j = lane_u32(i, m);
        if (before(w, j, v, i)) {
            v = w;
            i = j;
        }
    }
    if (lid.x == 0u) {
        chosen[wid.x] = i;
    }
}
