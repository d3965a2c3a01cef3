// gemv_packed (sources.rs puts it in matmul_gemv.wgsl and matmul_gemv_ln.wgsl in place of
// gemv_dot.wgsl's dot_slice, for q8 weights where the adapter's WGSL has dot4I8Packed): for each tile of 16
// blocks of inputs, packed once by the workgroup (q8_packed.wgsl), a thread of slice s < 16
// takes block s of the tile in its column, 32 weights in 8 contiguous words (q8 `w` is laid out
// so: formats.rs `to_q8`), in packed integer dot products with each of its rows. Needs K a
// multiple of 32 (load.rs checks). A thread's blocks are taken in order, then the same tree,
// whichever rows share the workgroup, so a row's output is bit for bit that of the row alone.

fn dot_slice(
    r0: u32, nr: u32, K: u32, N: u32, col: u32, slice: u32, li: u32,
    st0: vec2<f32>, st1: vec2<f32>, st2: vec2<f32>, st3: vec2<f32>,
) -> vec4<f32> {
    var a = vec4<f32>(0.0); // row p's sum in component p
    let blocks = K >> 5u;
    let scales = blocks * N * 8u; // the scales follow the bytes, [K / 32][N]
    for (var t = 0u; t < blocks; t = t + TILE) {
        pack_tile(t, nr, r0 * K, K, K, li, st0, st1, st2, st3);
        let b = t + slice;
        if (col < N && slice < TILE && b < blocks) {
            let at = (b * N + col) * 8u;
            let wa = vec4<u32>(w[at], w[at + 1u], w[at + 2u], w[at + 3u]);
            let wb = vec4<u32>(w[at + 4u], w[at + 5u], w[at + 6u], w[at + 7u]);
            let ws = bitcast<f32>(w[scales + b * N + col]);
            let q = slice * 8u; // the block's first word in the tile
            a.x = a.x + block_term(tile_dot(wa, wb, 0u, q), ws, b, 0u);
            if (BATCH_ROWS > 1u && nr > 1u) { a.y = a.y + block_term(tile_dot(wa, wb, 1u, q), ws, b, 1u); }
            if (BATCH_ROWS > 1u && nr > 2u) { a.z = a.z + block_term(tile_dot(wa, wb, 2u, q), ws, b, 2u); }
            if (BATCH_ROWS > 1u && nr > 3u) { a.w = a.w + block_term(tile_dot(wa, wb, 3u, q), ws, b, 3u); }
        }
    }
    return a;
}
