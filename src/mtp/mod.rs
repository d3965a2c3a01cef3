//! Multi-token prediction heads (Medusa-1, Cai et al. 2024): small layers on the model's last
//! hidden state that guess the tokens after the next one, the draft of `Draft::Mtp`. One forward
//! pass then checks the guesses as it checks any draft (`generate::speculative`), so the output
//! is exactly the plain loop's (greedy) or distributed as it (sampling).
//!
//! Head i, on the final hidden state h of a position (after ln_f: what the tied output matrix
//! multiplies), guesses the token i + 2 positions on: z = W_i h + b_i, h' = h + SiLU(z), and the
//! guess is the most likely of the draft vocabulary under E h', E the embedding rows of the N
//! draft ids (FR-Spec, 2025: the most frequent tokens; on a small model the 50257-wide output
//! product is most of a step, so a head over the whole vocabulary would cost about a step). The
//! heads' products over E are the CPU's 8-bit kernel's: E is rounded to
//! q8 at load (a guess is only a draft, checked by the model, so rounding can cost a kept token,
//! never a wrong one) and a step's guesses cost a few percent of the step, head by head while
//! they are sure enough. Whether they pay on an engine is measured (`trial`). The heads come in `mtp_heads.safetensors`
//! beside a model's weights, or inside its GGUF file (docs/formats.md; made by
//! tools/train_mtp_heads.py): tensors `mtp.{i}.weight` (d, d), `mtp.{i}.bias` (d),
//! `mtp.draft_ids` (N; ids stored as numbers) and `mtp.draft_embedding` (N, d).

use crate::backend::cpu::q8::{Q8Act, Q8Matrix};
use crate::backend::cpu::{exp_sum, gemv, silu_residual};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::TensorRef;
use std::collections::BTreeMap;

mod trial;
pub use trial::{HeadsStep, HeadsTrial, HeadsVerdict, HEADS_MARGIN, TRIAL_BLOCK, TRIAL_BLOCKS};

/// The heads' file beside a model's weights.
pub const HEADS_FILE: &str = "mtp_heads.safetensors";

/// The most heads a file may have (a draft longer than this rarely survives verification).
pub const MAX_HEADS: usize = 8;

/// The least confidence (the product of the heads' probabilities up to a guess) at which a guess
/// joins the draft. A drafted token costs a row of the verification pass whether it is kept or
/// not; on the demo model, natively, greedy drafts that stopped below 0.2 ran 1.12–1.15× plain
/// decoding against 0.90–0.94× for drafts of every guess, and 1.02–1.05× at 0.35
/// (`gpt2 bench --draft mtp`, 2-core AMD EPYC Zen 3, one thread).
pub const MIN_CONFIDENCE: f32 = 0.2;

/// Trained heads and their draft vocabulary, with the scratch their guesses use.
pub struct MtpHeads {
    d: usize,
    /// (W (d, d) row-major (out, in), b (d)) of each head.
    heads: Vec<(Vec<f32>, Vec<f32>)>,
    ids: Vec<u32>,
    /// (N, d): the draft vocabulary's embedding rows, in 8 bits.
    emb: Q8Matrix,
    rows: Vec<f32>,
    act: Q8Act,
    z: Vec<f32>,
    logits: Vec<f32>,
}

impl std::fmt::Debug for MtpHeads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MtpHeads({} heads, {} draft ids)",
            self.heads.len(),
            self.ids.len()
        )
    }
}

/// The heads' tensors as they arrive (a GGUF file's `mtp.*`, or `mtp_heads.safetensors`'s), as
/// f32 by name, checked and assembled by `finish`.
pub struct MtpParts {
    tensors: BTreeMap<String, ([usize; 2], Vec<f32>)>,
    /// The most values one of their tensors can need (the draft embedding at its largest): a
    /// file claiming more is refused before anything is allocated for it.
    limit: usize,
}

impl MtpParts {
    /// Parts for a model of `config`.
    pub fn new(config: &Config) -> Self {
        let d = config.n_embd;
        MtpParts {
            tensors: BTreeMap::new(),
            limit: (config.vocab_size * d).max(d * d),
        }
    }

    /// Whether a tensor of a weights file is one of the heads'.
    pub fn is_mtp(name: &str) -> bool {
        crate::weights::table::is_mtp(name)
    }

    /// One tensor of `file` (its values as f32; `shape` rows, columns; (1, n) for a vector).
    pub fn add(&mut self, file: &str, name: &str, t: TensorRef) -> Result<()> {
        self.check_size(file, name, t.len())?;
        let shape = if t.transposed {
            [t.shape[1], t.shape[0]]
        } else {
            t.shape
        };
        // As stored, in one pass over the bytes (f16 and f32 without the per-value arithmetic).
        let mut values = crate::platform::try_zeroed(t.len(), "a multi-token prediction head")?;
        t.dtype.dequantize(t.data, &mut values);
        self.tensors.insert(name.to_string(), (shape, values));
        Ok(())
    }

    fn check_size(&self, file: &str, name: &str, n: usize) -> Result<()> {
        if n > self.limit {
            return Err(Error::weights(
                file,
                format!(
                    "its multi-token prediction heads: tensor \"{name}\" has {n} values; \
                     this model's heads need at most {}",
                    self.limit
                ),
            ));
        }
        Ok(())
    }

    /// The heads, checked against `config`; `None` when the file had none. Errors name `file`.
    pub fn finish(mut self, file: &str, config: &Config) -> Result<Option<MtpHeads>> {
        if self.tensors.is_empty() {
            return Ok(None);
        }
        let bad =
            |why: String| Error::weights(file, format!("its multi-token prediction heads: {why}"));
        let (d, vocab) = (config.n_embd, config.vocab_size);
        let k = (0..=MAX_HEADS)
            .take_while(|i| self.tensors.contains_key(&format!("mtp.{i}.weight")))
            .count();
        if k == 0 || k > MAX_HEADS {
            return Err(bad(format!(
                "{k} heads (mtp.0.weight, mtp.1.weight, …); a file has 1 to {MAX_HEADS}"
            )));
        }
        // (rows, values) of a tensor of `cols` columns (a vector: its length, any `cols`; `rows`
        // None: any number of rows).
        let mut take = |name: &str, rows: Option<usize>, cols: Option<usize>| {
            let (shape, v) = (self.tensors.remove(name))
                .ok_or_else(|| bad(format!("tensor \"{name}\" is missing")))?;
            let vector = shape[0] == 1 || shape[1] == 1;
            let [r, c] = if vector && rows == Some(1) {
                [1, v.len()]
            } else {
                shape
            };
            if rows.is_some_and(|n| n != r) || cols.is_some_and(|n| n != c) || v.is_empty() {
                let want = |n: Option<usize>| n.map_or("N".into(), |n| n.to_string());
                return Err(bad(format!(
                    "tensor \"{name}\" has shape {shape:?}, expected [{}, {}]",
                    want(rows),
                    want(cols)
                )));
            }
            if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                return Err(bad(format!("tensor \"{name}\" holds {} at {i}", v[i])));
            }
            Ok((r, v))
        };
        let mut heads = Vec::new();
        for i in 0..k {
            let (_, w) = take(&format!("mtp.{i}.weight"), Some(d), Some(d))?;
            let (_, b) = take(&format!("mtp.{i}.bias"), Some(1), Some(d))?;
            heads.push((w, b));
        }
        let (_, ids) = take("mtp.draft_ids", Some(1), None)?;
        let n = ids.len();
        let ids = (ids.iter().enumerate())
            .map(|(i, &x)| match x {
                x if x >= 0.0 && x.fract() == 0.0 && (x as usize) < vocab => Ok(x as u32),
                x => Err(bad(format!(
                    "mtp.draft_ids[{i}] = {x} is not a token id below {vocab}"
                ))),
            })
            .collect::<Result<Vec<u32>>>()?;
        let (_, emb) = take("mtp.draft_embedding", Some(n), Some(d))?;
        let emb = Q8Matrix::quantize(&emb, n, d, d, 1)?;
        if let Some(extra) = self.tensors.keys().next() {
            return Err(bad(format!("tensor \"{extra}\" is not one of theirs")));
        }
        Ok(Some(MtpHeads {
            d,
            heads,
            ids,
            emb,
            rows: Vec::new(),
            act: Q8Act::default(),
            z: vec![0.0; d],
            logits: Vec::new(),
        }))
    }

    /// The heads of `mtp_heads.safetensors` (its bytes; errors name `file`).
    pub fn from_safetensors(file: &str, bytes: &[u8], config: &Config) -> Result<Option<MtpHeads>> {
        let st = safetensors::SafeTensors::deserialize(bytes)
            .map_err(|e| Error::weights(file, format!("it is not a safetensors file: {e}")))?;
        let mut parts = MtpParts::new(config);
        for (name, view) in st.tensors() {
            let shape = match view.shape() {
                [n] => [1, *n],
                [r, c] => [*r, *c],
                other => {
                    return Err(Error::weights(
                        file,
                        format!("tensor \"{name}\" has shape {other:?}"),
                    ))
                }
            };
            let data = view.data();
            parts.check_size(file, &name, shape[0] * shape[1])?;
            let values: Vec<f32> = match view.dtype() {
                safetensors::Dtype::F32 => (data.chunks_exact(4))
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                safetensors::Dtype::F16 => (data.chunks_exact(2))
                    .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                    .collect(),
                safetensors::Dtype::I32 => (data.chunks_exact(4))
                    .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32)
                    .collect(),
                other => {
                    return Err(Error::weights(
                        file,
                        format!("tensor \"{name}\" is {other:?}; heads are F32, F16 or I32"),
                    ))
                }
            };
            parts.tensors.insert(name, (shape, values));
        }
        parts.finish(file, config)
    }
}

impl MtpHeads {
    /// How many heads: the longest draft they make.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// Whether there are no heads (never: `finish` refuses a file without any).
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The draft vocabulary's size.
    pub fn draft_vocab(&self) -> usize {
        self.ids.len()
    }

    /// Bytes the heads hold.
    pub fn bytes(&self) -> usize {
        4 * (self.heads.iter())
            .map(|(w, b)| w.len() + b.len())
            .sum::<usize>()
            + self.emb.allocated_bytes()
            + 4 * self.ids.len()
    }

    /// The first `k` heads' guesses (at most `len`) from `h`, a position's final hidden state:
    /// the tokens 2, 3, … positions after it, into `out` — while the heads are sure enough: a
    /// guess is kept only while the product of the heads' probabilities so far (each head's
    /// softmax over the draft vocabulary) is at least `min_confidence`, so a step whose guesses
    /// are likely wrong asks the verification pass for no rows it would throw away.
    pub fn guess(&mut self, h: &[f32], k: usize, min_confidence: f32, out: &mut Vec<u32>) {
        out.clear();
        let (d, k) = (self.d, k.min(self.heads.len()));
        if k == 0 || h.len() != d {
            return;
        }
        let n = self.ids.len();
        self.logits.resize(n, 0.0);
        let mut confidence = 1.0;
        // Head by head, each only while the ones before it were sure enough (a row's product is
        // the same alone as in a tile of rows, so the guesses are those of all heads at once).
        for (w, b) in &self.heads[..k] {
            gemv(h, d, w, Some(b), &mut self.z);
            silu_residual(h, &self.z, &mut self.rows);
            self.act.quantize(&self.rows, d);
            self.emb.matmul(&self.act, None, &mut self.logits);
            let row = &self.logits[..n];
            let best = crate::sampling::argmax(row) as usize;
            // The top one's probability: 1 / Σ exp(x − max), summed in order; the sum only
            // grows, so once the confidence it leaves is below the floor the head is not sure.
            let top = row[best];
            let mut sum = 0.0f32;
            for part in row.chunks(256) {
                sum += exp_sum(part, top);
                if confidence / sum < min_confidence {
                    return;
                }
            }
            confidence /= sum;
            out.push(self.ids[best]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random heads: d = 64, three heads, 300 draft tokens; weights scaled so that the heads'
    /// confidence spreads over the floors tried.
    fn random_heads(seed: u64, sharp: f32) -> MtpHeads {
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let (d, n) = (64, 300);
        let heads = (0..3)
            .map(|_| {
                (
                    (0..d * d).map(|_| next() * 0.2).collect(),
                    (0..d).map(|_| next()).collect(),
                )
            })
            .collect();
        let emb: Vec<f32> = (0..n * d).map(|_| next() * sharp).collect();
        MtpHeads {
            d,
            heads,
            ids: (0..n as u32).map(|i| 7 * i + 1).collect(),
            emb: Q8Matrix::quantize(&emb, n, d, d, 1).unwrap(),
            rows: Vec::new(),
            act: Q8Act::default(),
            z: vec![0.0; d],
            logits: Vec::new(),
        }
    }

    /// The guesses as all heads' rows at once, then the floor over their softmaxes in order.
    fn all_at_once(m: &mut MtpHeads, h: &[f32], k: usize, floor: f32) -> Vec<u32> {
        let (d, n) = (m.d, m.ids.len());
        let mut rows = Vec::new();
        for (w, b) in &m.heads[..k] {
            gemv(h, d, w, Some(b), &mut m.z);
            let mut one = Vec::new();
            silu_residual(h, &m.z, &mut one);
            rows.extend(one);
        }
        let mut logits = vec![0.0; k * n];
        m.act.quantize(&rows, d);
        m.emb.matmul(&m.act, None, &mut logits);
        let (mut confidence, mut out) = (1.0f32, Vec::new());
        for row in logits.chunks_exact(n) {
            let best = crate::sampling::argmax(row) as usize;
            let top = row[best];
            confidence /= row.chunks(256).fold(0.0, |s, p| s + exp_sum(p, top));
            if confidence < floor {
                break;
            }
            out.push(m.ids[best]);
        }
        out
    }

    #[test]
    fn the_heads_guess_head_by_head_what_all_at_once_guesses() {
        let mut lengths = [0usize; 4];
        for seed in 1..40u64 {
            let mut m = random_heads(seed, [0.5, 2.0, 6.0][seed as usize % 3]);
            let mut next = seed.wrapping_mul(0x9e37_79b9);
            let h: Vec<f32> = (0..m.d)
                .map(|_| {
                    next = next.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (next >> 40) as f32 / (1u64 << 23) as f32 - 1.0
                })
                .collect();
            for k in 0..=3 {
                for floor in [0.0, 0.05, 0.2, 0.35, 0.6, 0.9] {
                    let mut got = Vec::new();
                    m.guess(&h, k, floor, &mut got);
                    let want = all_at_once(&mut m, &h, k, floor);
                    assert_eq!(got, want, "seed {seed}, k {k}, floor {floor}");
                    lengths[got.len()] += 1;
                }
            }
        }
        // The floors cut the guesses at every length, so the early stop was exercised.
        assert!(lengths.iter().all(|&n| n > 0), "{lengths:?}");
    }
}
