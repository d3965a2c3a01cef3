// act_q8 (sources.rs appends it to the kernels that read a product's input row, matmul_gemv,
// matmul_gemv_ln and lm_head): the CPU's q8 rounding of that row. With q8 weights the CPU rounds
// each block of 32 of a product's input to -127..=127 with the scale max|x| / 127 (`Q8Act`), so
// with Q8_ACT (set for q8 weights) a workgroup first finds the block scales of each of its rows
// (`act_block` for each block, from the values its kernel reads), then reads each value as
// round(x / scale) · scale (`act`). Without it `act` is the value. The including kernel says how
// many rows a workgroup reads (BATCH_ROWS, a pipeline constant) and how many blocks its longest
// row has (ACT_BLOCKS). `slot` gives the including kernels their rows' index into arrays of
// BATCH_ROWS rows.

override Q8_ACT: bool = false;
var<workgroup> act_scale: array<array<f32, ACT_BLOCKS>, BATCH_ROWS>;
var<workgroup> act_inv: array<array<f32, ACT_BLOCKS>, BATCH_ROWS>;

// Block b's scale of the workgroup's row p, from the largest magnitude of its values, as
// `quantize_block` takes it.
fn act_block(p: u32, b: u32, amax: f32) {
    let s = amax / 127.0;
    act_scale[p][b] = s;
    act_inv[p][b] = select(0.0, 1.0 / s, s > 0.0);
}

// Value v at index k of the workgroup's row p, rounded as its block is (with Q8_ACT).
fn act(v: f32, k: u32, p: u32) -> f32 {
    if (!Q8_ACT) {
        return v;
    }
    let b = k >> 5u;
    return clamp(round(v * act_inv[p][b]), -127.0, 127.0) * act_scale[p][b];
}

// Row p's index into an array of BATCH_ROWS rows: p itself wherever the code for row p runs, and
// in bounds in the one-row pipeline too, where that code never runs but must still be valid
// (a constant index past the array is an error to Chromium's WGSL compiler).
fn slot(p: u32) -> u32 {
    return min(p, BATCH_ROWS - 1u);
}
