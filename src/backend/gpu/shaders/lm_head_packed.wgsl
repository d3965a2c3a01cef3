// lm_head_packed (sources.rs puts it in lm_head.wgsl in place of head_sums, for q8 weights where
// the adapter's WGSL has dot4I8Packed): for each tile of 16 blocks of C, packed once by the
// workgroup (q8_packed.wgsl), lane l < 16 takes block l of the tile in its vocab row (32
// weights in 8 contiguous words of wte's row) in packed integer dot products with each row of
// xn. Needs C a multiple of 32 (load.rs checks): a block then is whole words of one row.

fn head_sums(r: u32, x0: u32, np: u32, C: u32, lane: u32, li: u32) -> array<f32, POS> {
    let more = BATCH_ROWS > 1u; // false: the guards below are no code
    var s0 = 0.0;
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var s4 = 0.0;
    var s5 = 0.0;
    var s6 = 0.0;
    var s7 = 0.0;
    let blocks = C >> 5u;
    // The chunk's scales follow its bytes: one per block of 32 of each row (formats.rs `to_q8`).
    let scales = dims.chunk_rows * (C >> 2u) + r * blocks;
    let none = vec2<f32>(0.0); // no LayerNorm statistics here
    for (var t = 0u; t < blocks; t = t + TILE) {
        pack_tile(t, np, x0, C, C, li, none, none, none, none);
        let b = t + lane;
        if (r < dims.chunk_rows && lane < TILE && b < blocks) {
            let at = r * (C >> 2u) + b * 8u;
            let wa = vec4<u32>(wte[at], wte[at + 1u], wte[at + 2u], wte[at + 3u]);
            let wb = vec4<u32>(wte[at + 4u], wte[at + 5u], wte[at + 6u], wte[at + 7u]);
            let ws = bitcast<f32>(wte[scales + b]);
            let q = lane * 8u; // the block's first word in the tile
            s0 = s0 + block_term(tile_dot(wa, wb, 0u, q), ws, b, 0u);
            if (more && np > 1u) { s1 = s1 + block_term(tile_dot(wa, wb, 1u, q), ws, b, 1u); }
            if (more && np > 2u) { s2 = s2 + block_term(tile_dot(wa, wb, 2u, q), ws, b, 2u); }
            if (more && np > 3u) { s3 = s3 + block_term(tile_dot(wa, wb, 3u, q), ws, b, 3u); }
            if (more && np > 4u) { s4 = s4 + block_term(tile_dot(wa, wb, 4u, q), ws, b, 4u); }
            if (more && np > 5u) { s5 = s5 + block_term(tile_dot(wa, wb, 5u, q), ws, b, 5u); }
            if (more && np > 6u) { s6 = s6 + block_term(tile_dot(wa, wb, 6u, q), ws, b, 6u); }
            if (more && np > 7u) { s7 = s7 + block_term(tile_dot(wa, wb, 7u, q), ws, b, 7u); }
        }
    }
    return array<f32, POS>(s0, s1, s2, s3, s4, s5, s6, s7);
}

// The four values c..c+3 of the row of xn from xr (st: unused, as q8_packed.wgsl calls it).
fn input4(xr: u32, c: u32, st: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(xn[xr + c], xn[xr + c + 1u], xn[xr + c + 2u], xn[xr + c + 3u]);
}
