//! ggml's tensor types as GGUF stores them, and their values as f32: the float types widened
//! exactly, the block-quantized ones dequantized as llama.cpp's `dequantize_row_*` (and the `gguf`
//! package's `dequantize`) do, operation for operation, so the values are the same bits.
//!
//! A quantized tensor is a sequence of blocks along its rows (ggml's `ne[0]`); each block holds
//! `block_len` values in `block_bytes` bytes. The layouts (ggml-common.h):
//! - Q8_0 (32 in 34): f16 `d`, 32 × i8 `q`; `d·q`.
//! - Q4_0 (32 in 18): f16 `d`, 16 bytes of nibbles (values `j` and `j + 16` in byte `j`, low then
//!   high); `d·(q − 8)`.
//! - Q5_0 (32 in 22): f16 `d`, u32 of fifth bits, nibbles as Q4_0; `d·(q − 16)`.
//! - Q4_K (256 in 144): f16 `d`, f16 `dmin`, 12 bytes of eight 6-bit scales and mins, 128 bytes of
//!   nibbles (64 values per 32 bytes, low then high); `(d·sc)·q − dmin·m` per 32 values.
//! - Q5_K (256 in 176): Q4_K's fields with 32 bytes of fifth bits before the nibbles.
//! - Q6_K (256 in 210): 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 × i8 scales (one per
//!   16 values), f16 `d`; `(d·sc)·(q − 32)`.

use half::{bf16, f16};

/// A tensor type of a GGUF file that gpt2-web reads (ggml's `ggml_type` number in `id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q5_0,
    Q4K,
    Q5K,
    Q6K,
}

/// ggml's names of its types by number, for the sentence about a type that is not read.
const NAMES: [&str; 42] = [
    "F32",
    "F16",
    "Q4_0",
    "Q4_1",
    "Q4_2",
    "Q4_3",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q8_1",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "Q8_K",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ3_XXS",
    "IQ1_S",
    "IQ4_NL",
    "IQ3_S",
    "IQ2_S",
    "IQ4_XS",
    "I8",
    "I16",
    "I32",
    "I64",
    "F64",
    "IQ1_M",
    "BF16",
    "Q4_0_4_4",
    "Q4_0_4_8",
    "Q4_0_8_8",
    "TQ1_0",
    "TQ2_0",
    "IQ4_NL_4_4",
    "IQ4_NL_4_8",
    "IQ4_NL_8_8",
    "MXFP4",
    "NVFP4",
    "Q1_0",
];

impl GgmlType {
    /// Every type read, finest first.
    pub const ALL: [GgmlType; 9] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q6K,
        GgmlType::Q5K,
        GgmlType::Q5_0,
        GgmlType::Q4K,
        GgmlType::Q4_0,
    ];

    /// The type with ggml's number `id`, or a sentence naming it when it is not one of ours.
    pub fn from_id(id: u32) -> Result<GgmlType, String> {
        Ok(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            30 => GgmlType::BF16,
            8 => GgmlType::Q8_0,
            2 => GgmlType::Q4_0,
            6 => GgmlType::Q5_0,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            other => {
                let name = NAMES
                    .get(other as usize)
                    .map_or_else(|| format!("type number {other}"), |n| n.to_string());
                return Err(format!(
                    "{name}, which gpt2-web does not read (it reads {})",
                    Self::ALL.map(|t| t.name()).join(", ")
                ));
            }
        })
    }

    /// ggml's number for the type.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::BF16 => 30,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_0 => 2,
            GgmlType::Q5_0 => 6,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
        }
    }

    /// ggml's name, e.g. `Q4_K`.
    pub fn name(self) -> &'static str {
        NAMES[self.id() as usize]
    }

    /// Values per block (1 for the float types).
    pub fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => 32,
            GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q8_0 => 34,
            GgmlType::Q4_0 => 18,
            GgmlType::Q5_0 => 22,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
        }
    }

    /// Bits per value, scales included.
    pub fn bits_per_value(self) -> f64 {
        (self.block_bytes() * 8) as f64 / self.block_len() as f64
    }

    /// Bytes of `n` values, or `None` when `n` is not a whole number of blocks or the bytes do
    /// not fit in 64 bits.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let len = self.block_len() as u64;
        if !n.is_multiple_of(len) {
            return None;
        }
        (n / len).checked_mul(self.block_bytes() as u64)
    }

    /// Value `i` of a tensor of this type whose bytes are `data` (row-major, blocks along rows).
    #[inline]
    pub fn value(self, data: &[u8], i: usize) -> f32 {
        let (n, bb) = (self.block_len(), self.block_bytes());
        let b = &data[i / n * bb..][..bb];
        let j = i % n;
        match self {
            GgmlType::F32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            GgmlType::F16 => half16(b, 0),
            GgmlType::BF16 => bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            GgmlType::Q8_0 => b[2 + j] as i8 as f32 * half16(b, 0),
            GgmlType::Q4_0 => half16(b, 0) * (nibble(&b[2..], j % 16, j / 16) as i8 - 8) as f32,
            GgmlType::Q5_0 => {
                let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                let q = nibble(&b[6..], j % 16, j / 16) | (((qh >> j) & 1) as u8) << 4;
                half16(b, 0) * (q as i8 - 16) as f32
            }
            GgmlType::Q4K | GgmlType::Q5K => {
                let sub = j / 32;
                let (sc, m) = scale_min(&b[4..16], sub);
                let qs = if self == GgmlType::Q4K {
                    &b[16..]
                } else {
                    &b[48..]
                };
                let mut q = nibble(qs, (sub / 2) * 32 + j % 32, sub % 2);
                if self == GgmlType::Q5K {
                    q |= ((b[16 + j % 32] >> sub) & 1) << 4;
                }
                let (d, dm) = (half16(b, 0) * sc as f32, half16(b, 2) * m as f32);
                d * q as f32 - dm
            }
            GgmlType::Q6K => {
                let (half, within) = (j / 128, j % 128);
                let low = nibble(&b[half * 64..], within % 64, within / 64);
                let high = (b[128 + half * 32 + within % 32] >> (2 * (within / 32))) & 3;
                let q = (low | high << 4) as i8 - 32;
                let d = half16(b, 208) * b[192 + j / 16] as i8 as f32;
                d * q as f32
            }
        }
    }

    /// Dequantizes whole blocks: `out.len()` values from the start of `data`.
    pub fn dequantize(self, data: &[u8], out: &mut [f32]) {
        match self {
            // The common float cases without the per-value block arithmetic.
            GgmlType::F32 => {
                for (o, c) in out.iter_mut().zip(data.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            GgmlType::F16 => {
                for (o, c) in out.iter_mut().zip(data.chunks_exact(2)) {
                    *o = half16(c, 0);
                }
            }
            _ => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = self.value(data, i);
                }
            }
        }
    }
}

#[inline(always)]
fn half16(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Nibble `high` (0 low, 1 high) of byte `byte`.
#[inline(always)]
fn nibble(qs: &[u8], byte: usize, high: usize) -> u8 {
    (qs[byte] >> (4 * high)) & 0x0F
}

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K / Q5_K block (`get_scale_min_k4`).
#[inline(always)]
fn scale_min(s: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}
