// attention: causal self-attention of the T new queries over the KV cache, one head each, each
// query over its own sequence's slot: out[t, h·HS:(h+1)·HS] = softmax(q·Kᵀ·scale over
// positions 0..=pos_t of slot_t) · V. Rows of several sequences may share a pass.
//
// kv_write.wgsl has already put the new keys and values in the cache. The keys are visited
// in tiles of 64 positions with an online softmax: a running max m and sum l, and the output
// accumulator rescaled by exp(m_old - m_new) whenever the max grows, so every exp() argument
// is ≤ 0 and no score buffer of n_ctx entries is needed. Each thread owns output dimensions
// lid, lid+64, ... (HS ≤ 256).
//
// With Q8_KV (q8 weights) it computes what the CPU's 8-bit attention does (`attention_q8`): the
// query rounded by blocks of 32 to -127..=127; the cache holds keys and values rounded as the
// CPU's 8-bit cache holds them (kv_write.wgsl); each weight exp(s − m) times its value's scale
// (max|v| / 63 of its row, which a thread finds from the cached row) rounded by blocks of 32
// positions to -127..=127 before it multiplies the value's 8-bit numbers. The online softmax's
// rescaling moves every weight of a block alike, which the rounding does not see.
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   C, NH, HS, scale (1/√HS, over layer+1 if the config says so)
//   2 qkv         storage, read        (n_ctx, 3C), first T rows used: q | k | v
//   3 k_cache     storage, read        (slots·n_ctx, C), a slot's rows 0..=pos_t valid
//   4 v_cache     storage, read        (slots·n_ctx, C)
//   5 rows        storage, read        (n_ctx, 2) u32: pos_t, slot_t·n_ctx
//   6 out         storage, read_write  (n_ctx, C), first T rows written
// Workgroup: 64 threads per (head, query).  Grid: (NH, T, 1).

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    C: u32,
    NH: u32,
    HS: u32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> k_cache: array<f32>;
@group(0) @binding(4) var<storage, read> v_cache: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<u32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

const WG: u32 = 64u;
const MAX_HS: u32 = 256u;
const PER_THREAD: u32 = MAX_HS / WG;
// Stands in for -inf (WGSL has no infinity literal); exp(NEG_BIG - finite) is 0.
const NEG_BIG: f32 = -3.0e38;

override Q8_KV: bool = false;

var<workgroup> q: array<f32, MAX_HS>;   // the query, pre-scaled
var<workgroup> qs: array<f32, 8>;       // with Q8_KV: its blocks' scales
var<workgroup> w: array<f32, WG>;       // exp(score - m) of the current tile
var<workgroup> red: array<f32, WG>;     // reduction scratch

// The max (is_max) or the sum of `v` over the workgroup; every thread gets it. A tree: its
// strides of SUBGROUP and more through workgroup memory, those below it by shuffles (lanes.wgsl).
fn reduce(v: f32, lid: u32, is_max: bool) -> f32 {
    let lanes = min(SUBGROUP, WG);
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s >= lanes; s = s / 2u) {
        if (lid < s) {
            red[lid] = combine(red[lid], red[lid + s], is_max);
        }
        workgroupBarrier();
    }
    if (lanes > 1u) { // uniform: a pipeline constant
        var t = red[lid];
        for (var m = lanes / 2u; m > 0u; m = m / 2u) {
            t = combine(t, lane_f32(t, m), is_max);
        }
        if (lid == 0u) {
            red[0] = t;
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn combine(a: f32, b: f32, is_max: bool) -> f32 {
    return select(a + b, max(a, b), is_max);
}

fn reduce_max(v: f32, lid: u32) -> f32 {
    return reduce(v, lid, true);
}

fn reduce_sum(v: f32, lid: u32) -> f32 {
    return reduce(v, lid, false);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t = wid.y;
    // Uniform per workgroup, so the barriers below stay in uniform control flow.
    if (h >= dims.NH || t >= run.T) {
        return;
    }
    let C = dims.C;
    let HS = dims.HS;
    let head = h * HS;
    let n = rows[2u * t] + 1u; // positions this query sees, in its own sequence's slot
    let base = rows[2u * t + 1u] * C;

    for (var d = lid; d < HS; d = d + WG) {
        q[d] = qkv[t * 3u * C + head + d] * dims.scale;
    }
    workgroupBarrier();
    if (Q8_KV) { // uniform: a pipeline constant
        if (lid * 32u < HS) {
            var amax = 0.0;
            for (var d = lid * 32u; d < min(lid * 32u + 32u, HS); d = d + 1u) {
                amax = max(amax, abs(q[d]));
            }
            qs[lid] = amax / 127.0;
        }
        workgroupBarrier();
        for (var d = lid; d < HS; d = d + WG) {
            let s = qs[d / 32u];
            let inv = select(0.0, 1.0 / s, s > 0.0);
            q[d] = clamp(round(q[d] * inv), -127.0, 127.0) * s;
        }
        workgroupBarrier();
    }

    var m = NEG_BIG;
    var l = 0.0;
    var acc: array<f32, PER_THREAD>;
    for (var start = 0u; start < n; start = start + WG) {
        let p = start + lid;
        var s = NEG_BIG;
        if (p < n) {
            s = 0.0;
            for (var d = 0u; d < HS; d = d + 1u) {
                s = s + q[d] * k_cache[base + p * C + head + d];
            }
        }
        let m_new = max(m, reduce_max(s, lid));
        var e = 0.0;
        if (p < n) {
            e = exp(s - m_new);
        }
        // With Q8_KV: the weight times its value's scale, rounded by blocks of 32 positions, over
        // that scale again (the cache holds the value times it).
        var f = e;
        if (Q8_KV) { // uniform: a pipeline constant
            var vs = 0.0;
            if (p < n) {
                for (var d = 0u; d < HS; d = d + 1u) {
                    vs = max(vs, abs(v_cache[base + p * C + head + d]));
                }
                vs = vs / 63.0;
            }
            w[lid] = e * vs;
            workgroupBarrier();
            let b0 = (lid / 32u) * 32u;
            var amax = 0.0;
            for (var j = b0; j < b0 + 32u; j = j + 1u) {
                amax = max(amax, w[j]);
            }
            let sw = amax / 127.0;
            let inv = select(0.0, 1.0 / sw, sw > 0.0);
            f = select(0.0, clamp(round(e * vs * inv), -127.0, 127.0) * sw / vs, vs > 0.0);
            workgroupBarrier();
        }
        w[lid] = f;
        let tile_sum = reduce_sum(e, lid); // its barriers also publish w
        let corr = exp(m - m_new);
        l = l * corr + tile_sum;
        let count = min(WG, n - start);
        for (var j = 0u; j < PER_THREAD; j = j + 1u) {
            let d = lid + j * WG;
            if (d < HS) {
                var a = acc[j] * corr;
                for (var k = 0u; k < count; k = k + 1u) {
                    a = a + w[k] * v_cache[base + (start + k) * C + head + d];
                }
                acc[j] = a;
            }
        }
        m = m_new;
        workgroupBarrier(); // everyone is done with w before the next tile overwrites it
    }

    for (var j = 0u; j < PER_THREAD; j = j + 1u) {
        let d = lid + j * WG;
        if (d < HS) {
            out[t * C + head + d] = acc[j] / l;
        }
    }
}
