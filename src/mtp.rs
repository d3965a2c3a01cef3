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
//! heads' products are one multi-row product over E, in the CPU's 8-bit kernel: E is rounded to
//! q8 at load (a guess is only a draft, checked by the model, so rounding can cost a kept token,
//! never a wrong one) and a step's guesses cost a few percent of the step. The heads come in `mtp_heads.safetensors`
//! beside a model's weights, or inside its GGUF file (docs/formats.md; made by
//! tools/train_mtp_heads.py): tensors `mtp.{i}.weight` (d, d), `mtp.{i}.bias` (d),
//! `mtp.draft_ids` (N; ids stored as numbers) and `mtp.draft_embedding` (N, d).

use crate::backend::cpu::gemv;
use crate::backend::cpu::q8::{Q8Act, Q8Matrix};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::TensorRef;
use std::collections::BTreeMap;

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
            // h + SiLU(z)
            self.rows.clear();
            (self.rows).extend(
                h.iter()
                    .zip(&self.z)
                    .map(|(h, z)| h + z / (1.0 + (-z).exp())),
            );
            self.act.quantize(&self.rows, d);
            self.emb.matmul(&self.act, None, &mut self.logits);
            let row = &self.logits[..n];
            let best = crate::sampling::argmax(row) as usize;
            // The top one's probability: 1 / Σ exp(x − max), summed in order; the sum only
            // grows, so once the confidence it leaves is below the floor the head is not sure.
            let top = row[best];
            let mut sum = 0.0f32;
            for part in row.chunks(256) {
                sum = part.iter().fold(sum, |s, x| s + (x - top).exp());
                if confidence / sum < min_confidence {
                    return;
                }
            }
            confidence /= sum;
            out.push(self.ids[best]);
        }
    }
}

/// Forward passes in one timed block of a heads trial, and blocks of each kind before a verdict
/// (after the first of each kind, which is not counted: it runs code the engine may not have
/// compiled in its optimising tier yet, and timed it had the plain loop at 1.0 ms a token in
/// Chromium where it runs at 0.7).
pub const TRIAL_BLOCK: usize = 8;
pub const TRIAL_BLOCKS: usize = 4;

/// How much faster a drafted token must come than a plain one for the heads to stay on. The trial
/// times whatever text comes first, and how many guesses hold depends on the text: on the demo
/// model the same engine ran 0.89–1.21× plain over `tools/speculative_prompts.json`'s eight
/// prompts (Chromium, 2-core AMD EPYC Zen 5), and a trial at 1.06× left drafting on where it
/// lost on most of them (0.94×). A margin of 10% keeps the heads on where they win by more than
/// that spread, and above the noise of timing blocks of a few milliseconds (a browser's clock
/// ticks by 0.1–1 ms outside a cross-origin isolated page).
pub const HEADS_MARGIN: f64 = 1.10;

/// Whether the multi-token prediction heads pay on this engine and model, measured: until a
/// verdict, `draft: 'mtp'` generations alternate blocks of `TRIAL_BLOCK` drafted forward passes
/// (the heads' guesses, the verification pass) with blocks of plain ones (one id, no guesses),
/// timing each block — the same tokens either way, since a drafted step gives the plain loop's
/// tokens. The first block of each kind warms up and is not counted; after `TRIAL_BLOCKS` more
/// of each, the milliseconds per token of each decide: the
/// heads stay on when drafted tokens came at least `HEADS_MARGIN` times as fast, and otherwise
/// `draft: 'mtp'` runs the plain loop unless `forceDraft` is set. A verdict can also be given
/// (a front end remembers one per browser, build and model: `Model::heads_trial`).
#[derive(Clone, Debug, Default)]
pub struct HeadsTrial {
    /// Milliseconds, tokens and forward passes of the finished blocks: [plain, drafted].
    sums: [(f64, usize, usize); 2],
    /// Finished blocks of each kind, the first (the warm-up, not counted) included.
    blocks: [usize; 2],
    /// The block being timed: its kind's index, milliseconds, tokens and forward passes.
    open: (usize, f64, usize, usize),
    pub verdict: Option<HeadsVerdict>,
}

/// What a heads trial found (or a front end remembered).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeadsVerdict {
    /// Whether `draft: 'mtp'` drafts (true) or runs the plain loop unless forced (false).
    pub on: bool,
    pub plain_ms_per_token: f64,
    pub drafted_ms_per_token: f64,
    /// Plain ÷ drafted milliseconds per token: above 1 the heads are faster.
    pub speedup: f64,
    /// Forward passes timed, both kinds together.
    pub forwards: usize,
    /// The verdict in a sentence.
    pub why: String,
    /// Given by the front end from an earlier visit, not measured now.
    #[serde(default)]
    pub remembered: bool,
}

/// The kind of a forward pass of a `draft: 'mtp'` generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadsStep {
    /// One id, no guesses: the plain loop's step.
    Plain,
    /// The heads' guesses checked by one verification pass.
    Drafted,
}

impl HeadsTrial {
    /// What the next forward pass of a generation that does not force the heads is: drafted
    /// when they are on, plain when off, and while measuring the kind of the open block (blocks
    /// alternate, drafted first).
    pub fn next_step(&self) -> HeadsStep {
        match &self.verdict {
            Some(v) if v.on => HeadsStep::Drafted,
            Some(_) => HeadsStep::Plain,
            None if self.open.3 > 0 => [HeadsStep::Plain, HeadsStep::Drafted][self.open.0],
            None if self.blocks[1] > self.blocks[0] => HeadsStep::Plain,
            None => HeadsStep::Drafted,
        }
    }

    /// Takes a verdict a front end remembered (measured by an earlier visit on this browser,
    /// build and model) instead of measuring: JSON as `HeadsVerdict` serializes. Refused, with
    /// the trial unchanged, when it is not one (a missing field, a time that is not a positive
    /// number, `on` that its speed-up contradicts).
    pub fn remember(&mut self, json: &str) -> Result<()> {
        let bad = |why: String| Error::param("mtpVerdict", why);
        let mut v: HeadsVerdict =
            serde_json::from_str(json).map_err(|e| bad(format!("not a verdict: {e}")))?;
        let times = [v.plain_ms_per_token, v.drafted_ms_per_token, v.speedup];
        if !times.iter().all(|t| t.is_finite() && *t > 0.0) || v.on != (v.speedup >= HEADS_MARGIN) {
            return Err(bad(format!(
                "{json} is not a measured verdict (positive times, on when the speed-up is at least {HEADS_MARGIN})"
            )));
        }
        v.why.truncate(v.why.floor_char_boundary(1000));
        v.remembered = true;
        self.verdict = Some(v);
        Ok(())
    }

    /// Whether a verdict is still to be measured.
    pub fn measuring(&self) -> bool {
        self.verdict.is_none()
    }

    /// A forward pass of kind `step` took `ms` and gave `tokens` tokens. Once both kinds have
    /// `TRIAL_BLOCKS` blocks after their warm-up, the verdict.
    pub fn record(&mut self, step: HeadsStep, ms: f64, tokens: usize) {
        if self.verdict.is_some() {
            return;
        }
        let kind = (step == HeadsStep::Drafted) as usize;
        if self.open.3 == 0 {
            self.open.0 = kind;
        }
        if self.open.0 != kind {
            return; // not the open block's kind (a forced or untimed step): not counted
        }
        self.open.1 += ms;
        self.open.2 += tokens;
        self.open.3 += 1;
        if self.open.3 < TRIAL_BLOCK {
            return;
        }
        let (k, ms, tokens, forwards) = std::mem::take(&mut self.open);
        if self.blocks[k] > 0 {
            let sum = &mut self.sums[k];
            (sum.0, sum.1, sum.2) = (sum.0 + ms, sum.1 + tokens, sum.2 + forwards);
        }
        self.blocks[k] += 1;
        if self.blocks.iter().all(|&b| b > TRIAL_BLOCKS) {
            self.verdict = Some(self.decide());
        }
    }

    fn decide(&self) -> HeadsVerdict {
        let per_token = |(ms, tokens, _): (f64, usize, usize)| ms / tokens.max(1) as f64;
        let (plain, drafted) = (per_token(self.sums[0]), per_token(self.sums[1]));
        let speedup = if drafted > 0.0 { plain / drafted } else { 1.0 };
        let on = speedup >= HEADS_MARGIN;
        let forwards = self.sums[0].2 + self.sums[1].2;
        let why = format!(
            "measured over {forwards} forward passes: {plain:.3} ms a token plain, {drafted:.3} ms \
             with the heads' drafts ({speedup:.2}×); {}",
            if on {
                "the heads draft".to_string()
            } else {
                format!("below {HEADS_MARGIN}×, so draft 'mtp' runs the plain loop unless forceDraft is set")
            }
        );
        HeadsVerdict {
            on,
            plain_ms_per_token: plain,
            drafted_ms_per_token: drafted,
            speedup,
            forwards,
            why,
            remembered: false,
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
            rows.extend(h.iter().zip(&m.z).map(|(h, z)| h + z / (1.0 + (-z).exp())));
        }
        let mut logits = vec![0.0; k * n];
        m.act.quantize(&rows, d);
        m.emb.matmul(&m.act, None, &mut logits);
        let (mut confidence, mut out) = (1.0f32, Vec::new());
        for row in logits.chunks_exact(n) {
            let best = crate::sampling::argmax(row) as usize;
            confidence /= row.iter().map(|x| (x - row[best]).exp()).sum::<f32>();
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

    #[test]
    fn a_heads_trial_alternates_blocks_and_decides_by_the_time_per_token() {
        let mut t = HeadsTrial::default();
        let mut kinds = Vec::new();
        while t.measuring() {
            let step = t.next_step();
            kinds.push(step);
            // Drafted passes give 1.5 tokens for 1.2 ms, plain ones 1 token for 1 ms; in the
            // warm-up blocks (the first of each kind), 50 ms: not counted.
            let warm = kinds.len() <= 2 * TRIAL_BLOCK;
            match step {
                HeadsStep::Drafted => {
                    let ms = if warm { 50.0 } else { 1.2 };
                    t.record(step, ms, if kinds.len() % 2 == 0 { 1 } else { 2 })
                }
                HeadsStep::Plain => t.record(step, if warm { 50.0 } else { 1.0 }, 1),
            }
        }
        assert_eq!(kinds.len(), 2 * TRIAL_BLOCK * (TRIAL_BLOCKS + 1));
        for (i, block) in kinds.chunks(TRIAL_BLOCK).enumerate() {
            let want = [HeadsStep::Drafted, HeadsStep::Plain][i % 2];
            assert!(block.iter().all(|&k| k == want), "block {i}: {block:?}");
        }
        let v = t.verdict.clone().unwrap();
        assert!((v.speedup - 1.5 / 1.2).abs() < 1e-9 && v.on, "{v:?}");
        assert_eq!(v.forwards, 2 * TRIAL_BLOCK * TRIAL_BLOCKS);
        assert_eq!(t.next_step(), HeadsStep::Drafted);
        // A step of the other kind than the open block's is not counted; slower drafts: off.
        let mut t = HeadsTrial::default();
        let mut n = 0;
        while t.measuring() {
            let step = t.next_step();
            t.record(step, if step == HeadsStep::Drafted { 1.2 } else { 1.0 }, 1);
            n += 1;
            if n == 2 * TRIAL_BLOCK + 3 {
                // Inside the second drafted block, the first counted one.
                t.record(HeadsStep::Drafted, 5.0, 1);
                t.record(HeadsStep::Plain, 0.0, 100);
            }
        }
        let v = t.verdict.clone().unwrap();
        assert!(!v.on && v.why.contains("plain loop"), "{v:?}");
        assert!(v.drafted_ms_per_token > 1.2, "the 5 ms pass counted: {v:?}");
        assert!(
            (v.plain_ms_per_token - 1.0).abs() < 1e-9,
            "a plain pass counted in a drafted block: {v:?}"
        );
        assert_eq!(t.next_step(), HeadsStep::Plain);
        // A front end gives it back on its next visit: remembered, the same otherwise.
        let mut again = HeadsTrial::default();
        again.remember(&serde_json::to_string(&v).unwrap()).unwrap();
        let r = again.verdict.clone().unwrap();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs(); // JSON's last bit
        assert!(r.remembered && (r.on, &r.why, r.forwards) == (v.on, &v.why, v.forwards));
        assert!(close(r.speedup, v.speedup) && close(r.plain_ms_per_token, v.plain_ms_per_token));
        assert_eq!(again.next_step(), HeadsStep::Plain);
        for bad in [
            "{}".to_string(),
            serde_json::to_string(&HeadsVerdict {
                on: true,
                ..v.clone()
            })
            .unwrap(),
            serde_json::to_string(&HeadsVerdict {
                plain_ms_per_token: -1.0,
                ..v.clone()
            })
            .unwrap(),
        ] {
            let mut t = HeadsTrial::default();
            assert!(t.remember(&bad).is_err() && t.measuring(), "{bad}");
        }
    }
}
