//! The weight matrices in the formats the GPU holds them besides f32: f16, and q8 as the CPU's
//! q8 rounds them (`Format`).

/// `v` (rows, cols) in the GPU's q8 (`kernels.rs` `q8_read`): blocks of 32 down each
/// column (`down`: a Conv1D weight, (K, N)) or along each row (a wte chunk), each rounded to
/// -63..=63 with one scale as the CPU's q8 rounds it (`backend/cpu/q8`), so both hold the same
/// weights; the bytes at their elements' places, four to a word, then the scales' bits.
pub(super) fn to_q8(v: &[f32], rows: usize, cols: usize, down: bool) -> Vec<u32> {
    // A line is what one block runs along: a column (down) or a row.
    let (lines, len) = if down { (cols, rows) } else { (rows, cols) };
    let at = |line: usize, i: usize| {
        if down {
            i * cols + line
        } else {
            line * cols + i
        }
    };
    let blocks = len.div_ceil(32);
    let mut bytes = vec![0u8; v.len().div_ceil(4) * 4];
    let mut scales = vec![0f32; lines * blocks];
    for line in 0..lines {
        for b in 0..blocks {
            let block = b * 32..(b * 32 + 32).min(len);
            let amax = block.clone().fold(0f32, |m, i| m.max(v[at(line, i)].abs()));
            let scale = amax / 63.0;
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            for i in block {
                let q = (v[at(line, i)] * inv).round_ties_even().clamp(-63.0, 63.0);
                bytes[at(line, i)] = q as i32 as i8 as u8;
            }
            scales[if down {
                b * cols + line
            } else {
                line * blocks + b
            }] = scale;
        }
    }
    let words = bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    words.chain(scales.iter().map(|s| s.to_bits())).collect()
}

/// f16 bits of `v`, padded to a whole number of 4 bytes (buffers are written in words).
pub(super) fn to_f16(v: &[f32]) -> Vec<u16> {
    let mut h: Vec<u16> = v
        .iter()
        .map(|&x| half::f16::from_f32(x).to_bits())
        .collect();
    if h.len() % 2 == 1 {
        h.push(0);
    }
    h
}
