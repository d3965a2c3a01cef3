//! The weight matrices in the formats the GPU holds them besides f32: f16, and q8 as the CPU's
//! q8 rounds them (`Format`).

/// `v` (rows, cols) in the GPU's q8 (`sources.rs` `q8_read`): blocks of 32 down each
/// column (`down`: a Conv1D weight, (K, N)) or along each row (a wte chunk), each rounded to
/// -63..=63 with one scale as the CPU's q8 rounds it (`backend/cpu/q8`), so both hold the same
/// weights; the bytes, four to a word, then the scales' bits. Along rows the bytes are at their
/// elements' places; down columns each block's 32 bytes are contiguous (8 words), the blocks of
/// a block row of K side by side (`[K / 32][N][32]`, the last block row padded with zeros), so
/// a word holds four consecutive inputs of one output, as dot4I8Packed takes them.
pub(super) fn to_q8(v: &[f32], rows: usize, cols: usize, down: bool) -> Vec<u32> {
    // A line is what one block runs along: a column (down) or a row.
    let (lines, len) = if down { (cols, rows) } else { (rows, cols) };
    let blocks = len.div_ceil(32);
    // Element i of line `line`: where it is in v, and where its byte goes.
    let at = |line: usize, i: usize| {
        if down {
            (i * cols + line, ((i / 32) * cols + line) * 32 + i % 32)
        } else {
            (line * cols + i, line * cols + i)
        }
    };
    let n_bytes = if down { blocks * cols * 32 } else { v.len() };
    let mut bytes = vec![0u8; n_bytes.div_ceil(4) * 4];
    let mut scales = vec![0f32; lines * blocks];
    for line in 0..lines {
        for b in 0..blocks {
            let block = b * 32..(b * 32 + 32).min(len);
            let amax = block
                .clone()
                .fold(0f32, |m, i| m.max(v[at(line, i).0].abs()));
            let scale = amax / 63.0;
            let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            for i in block {
                let (from, to) = at(line, i);
                let q = (v[from] * inv).round_ties_even().clamp(-63.0, 63.0);
                bytes[to] = q as i32 as i8 as u8;
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
