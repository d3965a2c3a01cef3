// q8_packed (sources.rs appends it after a packed part: gemv_packed.wgsl, lm_head_packed.wgsl):
// what both take their products with. The inputs go by tiles of 16 blocks of 32: for each tile
// the workgroup first rounds its rows' values (`input4`: gemv_dot.wgsl's over each GEMV's x or
// x normalised, lm_head_packed.wgsl's over ln_f's output) to -127..=127 as their blocks are
// (act_q8.wgsl: the CPU's `Q8Act`) and packs them, four signed bytes to a word, lowest first,
// into `xq`, once for all its threads
// (`pack_tile`); then a block of 32 q8 weights (8 words wa, wb, the same packing) meets a row's
// packed values in eight packed integer dot products (one instruction each where the GPU has
// them) summed exactly in an i32 (`tile_dot`), scaled once as the CPU's q8 scales a block's
// integer dot (`block_term`): GPU and CPU then differ only where their inputs do and in the
// order the blocks' terms are added.

const TILE: u32 = 16u; // blocks per tile
const TILE_WORDS: u32 = 128u; // a row's packed values of one tile: TILE · 32 / 4
var<workgroup> xq: array<array<u32, TILE_WORDS>, BATCH_ROWS>;

// Packs the tile from block t of the workgroup's first nr rows (row p from x0 + p·stride, of K
// values; st_p: its LayerNorm statistics where the kernel has them), its 256 threads a word at a
// time. Called in uniform control flow: it synchronises the workgroup, before and after.
fn pack_tile(t: u32, nr: u32, x0: u32, stride: u32, K: u32, li: u32,
             st0: vec2<f32>, st1: vec2<f32>, st2: vec2<f32>, st3: vec2<f32>) {
    workgroupBarrier(); // every thread is done with the tile before
    for (var i = li; i < nr * TILE_WORDS; i = i + 256u) {
        let p = i / TILE_WORDS;
        let k = (t << 5u) + ((i % TILE_WORDS) << 2u);
        if (k < K) {
            let st = select(select(select(st0, st1, p == 1u), st2, p == 2u), st3, p == 3u);
            let v = input4(x0 + p * stride, k, st);
            let b = k >> 5u;
            let q = clamp(round(v * act_inv[p][b]), vec4<f32>(-127.0), vec4<f32>(127.0));
            xq[p][i % TILE_WORDS] = pack4xI8(vec4<i32>(q));
        }
    }
    workgroupBarrier();
}

// The block's 32 weights (wa, wb) dotted with row p's packed values from word q of the tile.
fn tile_dot(wa: vec4<u32>, wb: vec4<u32>, p: u32, q: u32) -> i32 {
    var d = dot4I8Packed(xq[p][q], wa.x);
    d = d + dot4I8Packed(xq[p][q + 1u], wa.y);
    d = d + dot4I8Packed(xq[p][q + 2u], wa.z);
    d = d + dot4I8Packed(xq[p][q + 3u], wa.w);
    d = d + dot4I8Packed(xq[p][q + 4u], wb.x);
    d = d + dot4I8Packed(xq[p][q + 5u], wb.y);
    d = d + dot4I8Packed(xq[p][q + 6u], wb.z);
    d = d + dot4I8Packed(xq[p][q + 7u], wb.w);
    return d;
}

// Block b's integer dot d with row p as the CPU's q8 scales it: d · (weight scale · activation
// scale).
fn block_term(d: i32, ws: f32, b: u32, p: u32) -> f32 {
    return f32(d) * (ws * act_scale[p][b]);
}
