// layernorm: out[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias, per row of C.
//
// With last_only = 0 it normalises the T new rows in place of row r (ln_1, ln_2); with
// last_only = 1 it normalises only row T-1 and writes it to out row 0 (ln_f before the head,
// which needs just the last position). Two passes (mean, then variance of x - mean) keep the
// variance from cancelling; both sums are tree reductions (workgroup memory, then subgroup
// shuffles where the device has them: lanes.wgsl).
//
// Bindings (group 0):
//   0 run: Step   uniform   T
//   1 dims: Dims  uniform   C, last_only, eps
//   2 x           storage, read        (n_ctx, C)
//   3 weight      storage, read        (C,)
//   4 bias        storage, read        (C,)
//   5 out         storage, read_write  (n_ctx, C)
// Workgroup: 256 threads per row, striding over C.  Grid: (T, 1, 1), or (1, 1, 1) with last_only.

struct Step {
    T: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Dims {
    C: u32,
    last_only: u32,
    eps: f32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> run: Step;
@group(0) @binding(1) var<uniform> dims: Dims;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;

const WG: u32 = 256u;
// The row's sums: workgroup_sum.wgsl (after this file).

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let C = dims.C;
    var row_in = wid.x;
    var row_out = wid.x;
    if (dims.last_only != 0u) {
        row_in = run.T - 1u;
        row_out = 0u;
    }
    // Uniform per workgroup, so returning here keeps the barriers below in uniform control flow.
    if (row_in >= run.T) {
        return;
    }
    let base_in = row_in * C;
    let base_out = row_out * C;

    var s = 0.0;
    for (var c = lid; c < C; c = c + WG) {
        s = s + x[base_in + c];
    }
    let mean = workgroup_sum(s, lid) / f32(C);

    var sq = 0.0;
    for (var c = lid; c < C; c = c + WG) {
        let d = x[base_in + c] - mean;
        sq = sq + d * d;
    }
    let rstd = inverseSqrt(workgroup_sum(sq, lid) / f32(C) + dims.eps);

    for (var c = lid; c < C; c = c + WG) {
        out[base_out + c] = (x[base_in + c] - mean) * rstd * weight[c] + bias[c];
    }
}
