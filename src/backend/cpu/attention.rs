//! Causal self-attention over the KV cache, in the cache's format: f32 (exact, with f32 weights)
//! or 8-bit (with q8 weights: `q8::kv`, where each head's scores and weighted sum are products
//! on the q8 kernels, a prompt's rows four at a time, and a decode step reads a quarter of the
//! bytes). Either way a row's arithmetic is the same whatever rows are beside it, so a prompt's
//! rows equal decode steps bit for bit (speculative decoding's verification pass relies on it).

use super::grow;
use super::q8::{Keys, Q8Act, Values};
use super::vmath::{dot, exp, max, sum, weighted_sum};
use crate::config::Config;
use crate::error::Result;

/// One layer's keys, or its values, for every head and position.
pub(super) enum KvRows {
    /// (n_head, n_ctx, head_size)
    F32(Vec<f32>),
    /// One per head.
    Keys(Vec<Keys>),
    Values(Vec<Values>),
}

impl KvRows {
    /// Zeroed keys (or values) for every head and position of `config`'s context, 8-bit or
    /// f32, `what` naming them in an allocation failure.
    pub fn new(config: &Config, eight_bit: bool, keys: bool, what: &str) -> Result<KvRows> {
        let (nh, hs, n_ctx) = (config.n_head, config.head_size(), config.n_positions);
        Ok(match (eight_bit, keys) {
            (false, _) => KvRows::F32(crate::platform::try_zeroed(n_ctx * nh * hs, what)?),
            (true, true) => KvRows::Keys(
                (0..nh)
                    .map(|_| Keys::new(n_ctx, hs, what))
                    .collect::<Result<_>>()?,
            ),
            (true, false) => KvRows::Values(
                (0..nh)
                    .map(|_| Values::new(n_ctx, hs, what))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// Bytes allocated (capacity, not length).
    pub fn allocated_bytes(&self) -> usize {
        match self {
            KvRows::F32(v) => 4 * v.capacity(),
            KvRows::Keys(k) => k.iter().map(Keys::allocated_bytes).sum(),
            KvRows::Values(v) => v.iter().map(Values::allocated_bytes).sum(),
        }
    }

    /// Copies positions `0..len` of every head from `src` (the same shape and format).
    pub fn copy_from(&mut self, src: &KvRows, n_ctx: usize, hs: usize, len: usize) {
        match (self, src) {
            (KvRows::F32(d), KvRows::F32(s)) => {
                for (d, s) in d
                    .chunks_exact_mut(n_ctx * hs)
                    .zip(s.chunks_exact(n_ctx * hs))
                {
                    d[..len * hs].copy_from_slice(&s[..len * hs]);
                }
            }
            (KvRows::Keys(d), KvRows::Keys(s)) => {
                d.iter_mut().zip(s).for_each(|(d, s)| d.copy_from(s, len))
            }
            (KvRows::Values(d), KvRows::Values(s)) => {
                d.iter_mut().zip(s).for_each(|(d, s)| d.copy_from(s, len))
            }
            _ => unreachable!("KV caches of one backend share a format"),
        }
    }
}

/// The T new positions of one sequence in one layer: their query, key and value rows (`qkv`,
/// (T, 3C)) at positions `pos..`, the queries wanted from row `q0` on, and the attention scale.
#[derive(Clone, Copy)]
pub(super) struct NewRows<'a> {
    pub qkv: &'a [f32],
    pub pos: usize,
    pub q0: usize,
    pub scale: f32,
}

/// Causal self-attention of the new positions `new` over the cache `k`, `v` of one layer,
/// writing their keys and values into it first; `out` gets the rows of queries `q0..T`. `heads`
/// is scratch for the 8-bit path, (n_head, T − q0, head_size).
pub(super) fn attention(
    config: &Config,
    k: &mut KvRows,
    v: &mut KvRows,
    new: NewRows,
    out: &mut [f32],
    heads: &mut Vec<f32>,
) {
    match (k, v) {
        (KvRows::F32(k), KvRows::F32(v)) => attention_f32(config, k, v, new, out),
        (KvRows::Keys(k), KvRows::Values(v)) => attention_q8(config, k, v, new, out, heads),
        _ => unreachable!("keys and values of one backend share a format"),
    }
}

/// The 8-bit path: each head on its own (split between the threads), its T − q0 query rows
/// against its keys, then their weights against its values, into `heads`, then into `out`.
fn attention_q8(
    config: &Config,
    keys: &mut [Keys],
    values: &mut [Values],
    new: NewRows,
    out: &mut [f32],
    heads: &mut Vec<f32>,
) {
    let NewRows { qkv, pos, q0, .. } = new;
    let c = config.n_embd;
    let (hs, t) = (config.head_size(), qkv.len() / (3 * c));
    let tq = t - q0;
    if heads.len() < config.n_head * tq * hs {
        heads.resize(config.n_head * tq * hs, 0.0);
    }
    let heads = &mut heads[..config.n_head * tq * hs];
    let head = |h: usize, (k, v): (&mut Keys, &mut Values), o: &mut [f32]| {
        for i in 0..t {
            let row = &qkv[i * 3 * c..][..3 * c];
            k.store(pos + i, &row[c + h * hs..][..hs]);
            v.store(pos + i, &row[2 * c + h * hs..][..hs]);
        }
        HEAD.with_borrow_mut(|s| s.attend(k, v, h, (hs, c), new, o));
    };
    #[cfg(feature = "threads")]
    if rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        (keys.par_iter_mut().zip(values.par_iter_mut()))
            .zip(heads.par_chunks_mut(tq * hs))
            .enumerate()
            .for_each(|(h, (kv, o))| head(h, kv, o));
        scatter(heads, tq, hs, out);
        return;
    }
    let work = keys.iter_mut().zip(values.iter_mut());
    for (h, (kv, o)) in work.zip(heads.chunks_exact_mut(tq * hs)).enumerate() {
        head(h, kv, o);
    }
    scatter(heads, tq, hs, out);
}

/// `heads` (n_head, T, hs) into `out` (T, n_head · hs).
fn scatter(heads: &[f32], t: usize, hs: usize, out: &mut [f32]) {
    for (h, rows) in heads.chunks_exact(t * hs).enumerate() {
        for (i, r) in rows.chunks_exact(hs).enumerate() {
            let nh = heads.len() / (t * hs);
            out[(i * nh + h) * hs..][..hs].copy_from_slice(r);
        }
    }
}

/// One head's working buffers, per thread; they only grow.
#[derive(Default)]
struct HeadScratch {
    q: Vec<f32>,      // (T, hs) the queries
    qa: Q8Act,        // and in 8 bits
    scores: Vec<f32>, // (T, stride) then the weights
    wa: Q8Act,        // the weights in 8 bits
}

impl HeadScratch {
    /// Head `h` (of `hs` values in rows of C = `c`) of the new rows, into `o` (T − q0, hs).
    fn attend(
        &mut self,
        k: &Keys,
        v: &Values,
        h: usize,
        (hs, c): (usize, usize),
        new: NewRows,
        o: &mut [f32],
    ) {
        let NewRows {
            qkv,
            pos,
            q0,
            scale,
        } = new;
        let t = qkv.len() / (3 * c);
        // CHUNK query rows at a time, each over the positions its last row sees: the scratch is
        // (CHUNK, n_ctx) at most, and the weights' product skips most of the causal mask's zeros.
        for r0 in (q0..t).step_by(CHUNK) {
            let rows = CHUNK.min(t - r0);
            let stride = (pos + r0 + rows).div_ceil(4) * 4;
            let q = grow(&mut self.q, rows * hs);
            for (i, q) in (r0..r0 + rows).zip(q.chunks_exact_mut(hs)) {
                // The attention scale goes into the query, so the product gives the scores.
                let from = &qkv[i * 3 * c + h * hs..][..hs];
                q.iter_mut().zip(from).for_each(|(q, x)| *q = x * scale);
            }
            self.qa.quantize(q, hs);
            let seen = |r: usize| pos + r0 + r + 1;
            let scores = grow(&mut self.scores, rows * stride);
            k.scores(&self.qa, seen, scores, stride);
            let o = &mut o[(r0 - q0) * hs..][..rows * hs];
            let vs = v.scales();
            for (r, row) in scores.chunks_exact_mut(stride).enumerate() {
                let s = &mut row[..seen(r)];
                let max = max(s);
                // The softmax's numerators and their sum, then the values' scales into the
                // weights; 1 / Σ goes into the output. (Simple loops: they vectorise.)
                for s in s.iter_mut() {
                    *s = exp(*s - max);
                }
                let total = sum(s);
                s.iter_mut().zip(vs).for_each(|(s, vs)| *s *= vs);
                o[r * hs..][..hs].fill(1.0 / total);
            }
            // The weights over every position of the chunk's last row (zeros past a row's own).
            self.wa.quantize_prefix(scores, stride, seen);
            let sums = grow(&mut self.q, rows * hs); // the queries are done with
            v.weighted(&self.wa, sums);
            o.iter_mut().zip(sums.iter()).for_each(|(o, s)| *o *= s);
        }
    }
}

/// Query rows per pass of the 8-bit path (a multiple of the kernels' tile of 4).
const CHUNK: usize = 32;

thread_local! {
    static HEAD: std::cell::RefCell<HeadScratch> = std::cell::RefCell::new(HeadScratch::default());
}

/// The f32 path: each (query row, head) pair on its own (split between the threads), reading
/// one contiguous run of the cache.
fn attention_f32(config: &Config, kc: &mut [f32], vc: &mut [f32], new: NewRows, out: &mut [f32]) {
    let NewRows {
        qkv,
        pos,
        q0,
        scale,
    } = new;
    let c = config.n_embd;
    let (nh, hs, n_ctx) = (config.n_head, config.head_size(), config.n_positions);
    let t = qkv.len() / (3 * c);
    for i in 0..t {
        let row = &qkv[i * 3 * c..(i + 1) * 3 * c];
        for head in 0..nh {
            let at = (head * n_ctx + pos + i) * hs;
            kc[at..at + hs].copy_from_slice(&row[c + head * hs..][..hs]);
            vc[at..at + hs].copy_from_slice(&row[2 * c + head * hs..][..hs]);
        }
    }
    let (kc, vc) = (&*kc, &*vc);
    // One (query row, head) pair: out[j] with j = row · n_head + head.
    let attend = |j: usize, o: &mut [f32]| {
        let (i, head) = (q0 + j / nh, j % nh);
        let n = pos + i + 1; // positions this query sees
        let q = &qkv[i * 3 * c + head * hs..][..hs];
        let k = &kc[head * n_ctx * hs..][..n * hs];
        let v = &vc[head * n_ctx * hs..][..n * hs];
        SCORES.with_borrow_mut(|scores| {
            if scores.len() < n_ctx {
                scores.resize(n_ctx, 0.0); // once per thread
            }
            let scores = &mut scores[..n];
            let mut max = f32::NEG_INFINITY;
            for (s, k) in scores.iter_mut().zip(k.chunks_exact(hs)) {
                *s = dot(q, k) * scale;
                max = max.max(*s);
            }
            for s in scores.iter_mut() {
                *s = exp(*s - max);
            }
            let inv = 1.0 / sum(scores);
            weighted_sum(scores, v, inv, o);
        })
    };
    #[cfg(feature = "threads")]
    if rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        out.par_chunks_mut(hs)
            .enumerate()
            .for_each(|(j, o)| attend(j, o));
        return;
    }
    for (j, o) in out.chunks_exact_mut(hs).enumerate() {
        attend(j, o);
    }
}

thread_local! {
    /// Attention scores of one query row over the positions it sees (n_ctx), per thread.
    static SCORES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(n_head: usize, n_embd: usize, n_ctx: usize) -> Config {
        let json = format!(
            r#"{{"n_layer":1,"n_head":{n_head},"n_embd":{n_embd},"n_positions":{n_ctx},"vocab_size":16}}"#
        );
        Config::from_json(json.as_bytes()).unwrap()
    }

    /// `n` seeded values in [-2, 2].
    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut v = crate::backend::cpu::q8::tests::data(n, seed);
        v.iter_mut().for_each(|x| *x *= 2.0);
        v
    }

    /// A prompt of `t` rows then `steps` decode steps, through the cache format `eight_bit`:
    /// every row's output, (t + steps, C).
    fn run(config: &Config, eight_bit: bool, qkv: &[f32], t: usize) -> Vec<f32> {
        let c = config.n_embd;
        let mut k = KvRows::new(config, eight_bit, true, "keys").unwrap();
        let mut v = KvRows::new(config, eight_bit, false, "values").unwrap();
        let rows = qkv.len() / (3 * c);
        let (mut out, mut heads) = (vec![0f32; rows * c], Vec::new());
        let (first, rest) = out.split_at_mut(t * c);
        let new = |qkv, pos| NewRows {
            qkv,
            pos,
            q0: 0,
            scale: 0.3,
        };
        attention(
            config,
            &mut k,
            &mut v,
            new(&qkv[..t * 3 * c], 0),
            first,
            &mut heads,
        );
        for (i, o) in (t..).zip(rest.chunks_exact_mut(c)) {
            let row = &qkv[i * 3 * c..][..3 * c];
            attention(config, &mut k, &mut v, new(row, i), o, &mut heads);
        }
        out
    }

    #[test]
    fn eight_bit_attention_is_close_to_f32_and_a_prompt_row_is_a_decode_step_bit_for_bit() {
        // Head sizes off the block of 32 and the group of 4; prompts off the tile of 4 and
        // longer than a chunk of query rows.
        for (nh, c, rows, t) in [
            (2, 64, 9, 5),
            (3, 3 * 40, 70, 67),
            (1, 18, 6, 1),
            (4, 256, 133, 130),
        ] {
            let config = config(nh, c, 160);
            let qkv = data(rows * 3 * c, (nh * c + rows) as u32);
            let exact = run(&config, false, &qkv, t);
            let q8 = run(&config, true, &qkv, t);
            let (mut err, mut norm) = (0f64, 0f64);
            for (a, b) in exact.iter().zip(&q8) {
                err += ((a - b) as f64).powi(2);
                norm += (*a as f64).powi(2);
            }
            let rel = (err / norm).sqrt();
            assert!(rel < 0.02, "{nh} heads, C = {c}: relative error {rel}");
            // Every row of the whole sequence as one prompt equals the rows computed as a
            // shorter prompt and then decode steps.
            let all = run(&config, true, &qkv, rows);
            for (i, (a, b)) in all.chunks_exact(c).zip(q8.chunks_exact(c)).enumerate() {
                assert!(
                    a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{nh} heads, C = {c}: row {i} differs between a prompt and decode steps"
                );
            }
        }
    }

    #[test]
    fn a_copied_cache_gives_the_same_attention() {
        let config = config(2, 64, 80);
        let c = config.n_embd;
        let qkv = data(41 * 3 * c, 7);
        for eight_bit in [false, true] {
            let mut k = KvRows::new(&config, eight_bit, true, "keys").unwrap();
            let mut v = KvRows::new(&config, eight_bit, false, "values").unwrap();
            let (mut out, mut heads) = (vec![0f32; 40 * c], Vec::new());
            let new = |qkv, pos| NewRows {
                qkv,
                pos,
                q0: 0,
                scale: 0.3,
            };
            let first = new(&qkv[..40 * 3 * c], 0);
            attention(&config, &mut k, &mut v, first, &mut out, &mut heads);
            let mut k2 = KvRows::new(&config, eight_bit, true, "keys").unwrap();
            let mut v2 = KvRows::new(&config, eight_bit, false, "values").unwrap();
            k2.copy_from(&k, 80, 32, 40);
            v2.copy_from(&v, 80, 32, 40);
            let (mut a, mut b) = (vec![0f32; c], vec![0f32; c]);
            let last = &qkv[40 * 3 * c..];
            attention(&config, &mut k, &mut v, new(last, 40), &mut a, &mut heads);
            attention(&config, &mut k2, &mut v2, new(last, 40), &mut b, &mut heads);
            assert_eq!(a, b, "8-bit: {eight_bit}");
        }
    }

    #[test]
    fn non_finite_inputs_do_not_panic() {
        let config = config(2, 64, 16);
        let mut qkv = data(4 * 3 * 64, 3);
        qkv[5] = f32::NAN;
        qkv[64 + 3] = f32::INFINITY;
        qkv[128 + 7] = f32::NEG_INFINITY;
        run(&config, true, &qkv, 2);
    }
}
