// kv_write: copies the keys and values of the T new rows from qkv into the layer's cache, each
// into its own sequence's slot at its position: k_cache[slot_t·n_ctx + pos_t, :] = qkv[t, C:2C]
// and v_cache likewise from qkv[t, 2C:3C]. A dispatch of its own because attention must see
// every new key before any query reads them.
//
// With Q8_KV (q8 weights) each is stored as the CPU's 8-bit cache holds it (`q8/kv.rs`): a key
// rounded to -63..=63 by blocks of 32 of its head, each with the scale max|k| / 63; a value
// rounded to -63..=63 with one scale for its head, max|v| / 63; each stored as round(x / s) · s.
// Every thread finds the scale of its own block or head from qkv (32 or HS reads: the cache
// write is small beside the products).
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   C, HS
//   2 qkv         storage, read        (n_ctx, 3C), first T rows used: q | k | v
//   3 rows        storage, read        (n_ctx, 2) u32: pos_t, slot_t·n_ctx
//   4 k_cache     storage, read_write  (slots·n_ctx, C)
//   5 v_cache     storage, read_write  (slots·n_ctx, C)
// Workgroup: 256 threads, one per (t, c).  Grid: (ceil(T·C / 256), 1, 1).

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    C: u32,
    HS: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> rows: array<u32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<f32>;

override Q8_KV: bool = false;

// qkv[at + k] for k in lo..hi rounded to -63..=63 by their largest magnitude, the value at k.
fn rounded(at: u32, lo: u32, hi: u32, k: u32) -> f32 {
    var amax = 0.0;
    for (var j = lo; j < hi; j = j + 1u) {
        amax = max(amax, abs(qkv[at + j]));
    }
    let s = amax / 63.0;
    let inv = select(0.0, 1.0 / s, s > 0.0);
    return clamp(round(qkv[at + k] * inv), -63.0, 63.0) * s;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let C = dims.C;
    let i = gid.x;
    if (i >= run.T * C) {
        return;
    }
    let t = i / C;
    let c = i % C;
    let dst = (rows[2u * t + 1u] + rows[2u * t]) * C + c; // the row's slot, its position
    if (!Q8_KV) {
        k_cache[dst] = qkv[t * 3u * C + C + c];
        v_cache[dst] = qkv[t * 3u * C + 2u * C + c];
        return;
    }
    let head = (c / dims.HS) * dims.HS; // its head's first column
    let block = head + ((c - head) / 32u) * 32u; // its key block's
    let end = head + dims.HS;
    k_cache[dst] = rounded(t * 3u * C + C, block, min(block + 32u, end), c);
    v_cache[dst] = rounded(t * 3u * C + 2u * C, head, end, c);
}
