// gemv_dot (sources.rs appends it to matmul_gemv.wgsl and matmul_gemv_ln.wgsl): a slice's
// products, over the values each kernel reads of its rows (`input`: x as it is, or normalised).

// For each of the nr rows from r0 (component p of the result: row r0 + p): input(row, k) ·
// w[k, col] summed over k = slice, slice + 32, ..., four w rows a step (their loads in flight
// together), each weight read once for every row. Each row's sums are variables of their own (an
// array indexed in a loop may live in slower memory); a row past nr adds nothing (uniform
// branches), nor a column past N. st0..st3: each row's (mean, rstd) in matmul_gemv_ln.wgsl;
// li: for gemv_packed.wgsl's, which sources.rs puts in its place for q8 weights where WGSL has
// dot4I8Packed.
fn dot_slice(
    r0: u32, nr: u32, K: u32, N: u32, col: u32, slice: u32, li: u32,
    st0: vec2<f32>, st1: vec2<f32>, st2: vec2<f32>, st3: vec2<f32>,
) -> vec4<f32> {
    if (col >= N) {
        return vec4<f32>(0.0);
    }
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    let x0 = r0 * K;
    var k = slice;
    for (; k + 3u * SLICES < K; k = k + 4u * SLICES) {
        let xs = xs4(x0, k, 0u, st0); // the first row's values before the weights, as one row alone
        let ws = vec4<f32>(
            weight(k, col, N),
            weight(k + SLICES, col, N),
            weight(k + 2u * SLICES, col, N),
            weight(k + 3u * SLICES, col, N),
        );
        a0 = a0 + xs * ws;
        if (BATCH_ROWS > 1u && nr > 1u) { a1 = a1 + xs4(x0 + K, k, 1u, st1) * ws; }
        if (BATCH_ROWS > 1u && nr > 2u) { a2 = a2 + xs4(x0 + 2u * K, k, 2u, st2) * ws; }
        if (BATCH_ROWS > 1u && nr > 3u) { a3 = a3 + xs4(x0 + 3u * K, k, 3u, st3) * ws; }
    }
    for (; k < K; k = k + SLICES) {
        let wv = weight(k, col, N);
        a0.x = a0.x + act(input(x0, k, st0), k, 0u) * wv;
        if (BATCH_ROWS > 1u && nr > 1u) { a1.x = a1.x + act(input(x0 + K, k, st1), k, 1u) * wv; }
        if (BATCH_ROWS > 1u && nr > 2u) { a2.x = a2.x + act(input(x0 + 2u * K, k, st2), k, 2u) * wv; }
        if (BATCH_ROWS > 1u && nr > 3u) { a3.x = a3.x + act(input(x0 + 3u * K, k, st3), k, 3u) * wv; }
    }
    return vec4<f32>(
        (a0.x + a0.y) + (a0.z + a0.w),
        (a1.x + a1.y) + (a1.z + a1.w),
        (a2.x + a2.y) + (a2.z + a2.w),
        (a3.x + a3.y) + (a3.z + a3.w),
    );
}

// The four values of the row from `base` that a step of dot_slice takes (k, k + 32, …),
// rounded as the workgroup's row p is (st: as `input` takes it).
fn xs4(base: u32, k: u32, p: u32, st: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(
        act(input(base, k, st), k, p),
        act(input(base, k + SLICES, st), k + SLICES, p),
        act(input(base, k + 2u * SLICES, st), k + 2u * SLICES, p),
        act(input(base, k + 3u * SLICES, st), k + 3u * SLICES, p),
    );
}

// The four consecutive values k..k+3 of the row from `base`, as they are before rounding: what
// q8_packed.wgsl reads.
fn input4(base: u32, k: u32, st: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(
        input(base, k, st),
        input(base, k + 1u, st),
        input(base, k + 2u, st),
        input(base, k + 3u, st),
    );
}
