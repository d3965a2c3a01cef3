//! Picking the next token from the logits: greedy, temperature, top-k, top-p, min-p and a
//! repetition penalty, in the order transformers' `generate` applies them
//! (`RepetitionPenaltyLogitsProcessor`, then the temperature, top-k, top-p and min-p warpers).
//!
//! Randomness comes from a seeded xoshiro256** generator written out here, so a seed gives the
//! same tokens natively and in WebAssembly: nothing in the loop asks the OS for randomness.

mod rng;
pub use rng::Rng;

/// Sampling settings: the generate options the sampler reads (`GenerateParams::sampling`, whose
/// `validate` checks their limits before a sampler is made).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 means greedy (argmax); otherwise logits are divided by it. Below `GREEDY_BELOW` it is
    /// greedy too (dividing by 1e-39 would overflow the logits to infinity and the softmax to NaN).
    pub temperature: f32,
    /// Keep only the k most likely tokens; 0 turns it off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p; 1 turns it off.
    pub top_p: f32,
    /// Drop tokens whose probability is below min_p × the top probability; 0 turns it off.
    pub min_p: f32,
    /// > 1 discourages tokens already in the prompt or output (CTRL's rule); 1 turns it off.
    pub repetition_penalty: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

/// Temperatures below this pick the most likely token, exactly as 0 does.
pub const GREEDY_BELOW: f32 = 1e-4;

impl SamplingParams {
    /// Whether these settings pick the most likely token every time.
    pub fn is_greedy(&self) -> bool {
        self.temperature < GREEDY_BELOW
    }

    /// Whether the pick is `argmax` of the logits as they come (greedy, no repetition penalty):
    /// then a backend may choose it where the logits are (`Want::Argmax`, on the GPU).
    pub fn picks_argmax(&self) -> bool {
        self.is_greedy() && self.repetition_penalty == 1.0
    }

    /// How many of the largest logits a pick reads when it reads nothing else of them (so that
    /// `Sampler::pick_top` gives `pick`'s token from those alone): 1 when greedy, `top_k` when
    /// sampling from the top k; `None` with a repetition penalty (which moves logits by the
    /// history) or without a top-k.
    pub fn reads_top(&self) -> Option<usize> {
        if self.repetition_penalty != 1.0 {
            return None;
        }
        match self.is_greedy() {
            true => Some(1),
            false => (self.top_k > 0).then_some(self.top_k),
        }
    }
}

/// One candidate of the distribution the sampler drew from.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Candidate {
    pub id: u32,
    pub prob: f32,
}

/// Logits more than this below the maximum have probability < e⁻⁴⁰ of the top token and cannot
/// change which tokens top-p keeps; skipping them keeps the sort short.
const NEGLIGIBLE: f32 = 40.0;

/// Picks tokens; owns its random generator and scratch space, reused every step.
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    /// (logit, id) of the candidates still in play this step.
    cand: Vec<(f32, u32)>,
    seen: Vec<bool>,
    /// The probability the last token picked with `n_top` > 0 had (`picked_prob`).
    picked: Option<f32>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Self {
        let rng = Rng::new(params.seed);
        Sampler {
            params,
            rng,
            cand: Vec::new(),
            seen: Vec::new(),
            picked: None,
        }
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// The probability the token of the last `pick`/`verify` asked for candidates (`n_top` > 0)
    /// had in the distribution it came from, the one the candidates' probabilities are of (for
    /// greedy, the softmax at temperature 1); `None` when no candidates were asked for.
    pub fn picked_prob(&self) -> Option<f32> {
        self.picked
    }

    /// Applies the repetition penalty to `logits` for every distinct id in `history`:
    /// positive logits are divided by the penalty, negative ones multiplied.
    pub fn apply_repetition_penalty(&mut self, logits: &mut [f32], history: &[u32]) {
        let r = self.params.repetition_penalty;
        if r == 1.0 {
            return;
        }
        self.seen.clear();
        self.seen.resize(logits.len(), false);
        for &id in history {
            let i = id as usize;
            if i < logits.len() && !self.seen[i] {
                self.seen[i] = true;
                let l = logits[i];
                logits[i] = if l > 0.0 { l / r } else { l * r };
            }
        }
    }

    /// Picks the next token from `logits` (modified in place), given the ids so far.
    /// Fills `top` with up to `n_top` candidates of the final distribution, most likely first.
    pub fn pick(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        n_top: usize,
        top: &mut Vec<Candidate>,
    ) -> u32 {
        self.verify(logits, history, None, n_top, top).0
    }

    /// `pick` from the candidates a backend chose (`Want::Top(k)`: the k largest logits and their
    /// ids, `top_k`'s), for settings that read nothing else of the logits (`SamplingParams::reads_top`, at
    /// most k): the
    /// token `pick` gives from the whole row, with the same draw of the generator.
    pub fn pick_top(&mut self, top: &[(f32, u32)]) -> u32 {
        self.picked = None;
        if self.params.is_greedy() {
            let first = (top.iter()).min_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            return first.map_or(0, |c| c.1);
        }
        self.gather_from(top.iter().copied(), self.params.temperature, true);
        let max = self.restrict();
        let total: f64 = self.cand.iter().map(|c| ((c.0 - max) as f64).exp()).sum();
        self.draw_residual(max, total, None)
    }

    /// Picks the next token as `pick` does, or, given a token a draft proposed for sure (prompt
    /// lookup: the draft's distribution q is one-hot), the speculative-sampling rule: keep the
    /// draft with probability min(1, p/q) = p(draft), else draw from max(0, p − q) normalised,
    /// which is p without the draft. Either way the token is distributed exactly as `pick`'s.
    /// Greedy keeps the draft when it is the argmax, so the tokens are `pick`'s exactly.
    /// Returns the token and whether it is the draft.
    pub fn verify(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        draft: Option<u32>,
        n_top: usize,
        top: &mut Vec<Candidate>,
    ) -> (u32, bool) {
        self.verify_against(logits, history, draft.map(|d| (d, None)), n_top, top)
    }

    /// `verify` for a draft token drawn from a draft model's distribution `q` (dense over the
    /// vocabulary, from `distribution` with the same settings): keep it with probability
    /// min(1, p(d)/q(d)), else draw from max(0, p − q) normalised (Leviathan et al. 2023).
    pub fn verify_with_q(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        draft: u32,
        q: &[f32],
        n_top: usize,
        top: &mut Vec<Candidate>,
    ) -> (u32, bool) {
        self.verify_against(logits, history, Some((draft, Some(q))), n_top, top)
    }

    /// The distribution `pick` draws from, dense over the vocabulary (0 outside the candidates;
    /// one-hot at the argmax when greedy), into `out`.
    pub fn distribution(&mut self, logits: &mut [f32], history: &[u32], out: &mut Vec<f32>) {
        out.clear();
        out.resize(logits.len(), 0.0);
        self.apply_repetition_penalty(logits, history);
        if self.params.is_greedy() {
            out[argmax(logits) as usize] = 1.0;
            return;
        }
        let max = self.filter(logits);
        let total: f64 = self.cand.iter().map(|c| ((c.0 - max) as f64).exp()).sum();
        for c in &self.cand {
            out[c.1 as usize] = (((c.0 - max) as f64).exp() / total) as f32;
        }
    }

    /// A token drawn from a dense distribution (`distribution`'s), with this sampler's
    /// generator; the argmax when greedy.
    pub fn draw(&mut self, dist: &[f32]) -> u32 {
        if self.params.is_greedy() {
            return argmax(dist);
        }
        let mut u = self.rng.next_f64() * dist.iter().map(|&p| p as f64).sum::<f64>();
        let mut last = 0;
        for (i, &p) in dist.iter().enumerate() {
            if p > 0.0 {
                last = i as u32;
                u -= p as f64;
                if u < 0.0 {
                    return i as u32;
                }
            }
        }
        last
    }

    /// The candidates after temperature, top-k, top-p and min-p, in `cand` (sorted by logit,
    /// descending, when restricted); returns their largest scaled logit.
    fn filter(&mut self, logits: &[f32]) -> f32 {
        let p = self.params.clone();
        let restrict = p.top_k > 0 || p.top_p < 1.0 || p.min_p > 0.0;
        self.gather(logits, p.temperature, restrict);
        self.restrict()
    }

    /// `filter` after `gather`: top-k, top-p and min-p over `cand`; their largest scaled logit.
    fn restrict(&mut self) -> f32 {
        let p = self.params.clone();
        if p.top_k > 0 && p.top_k < self.cand.len() {
            self.cand.truncate(p.top_k);
        }
        let max = self
            .cand
            .iter()
            .map(|c| c.0)
            .fold(f32::NEG_INFINITY, f32::max);
        let total: f64 = self.cand.iter().map(|c| ((c.0 - max) as f64).exp()).sum();
        if p.top_p < 1.0 {
            let mut cum = 0.0;
            let mut keep = 0;
            for c in &self.cand {
                if keep > 0 && cum >= p.top_p as f64 {
                    break;
                }
                cum += ((c.0 - max) as f64).exp() / total;
                keep += 1;
            }
            self.cand.truncate(keep);
        }
        if p.min_p > 0.0 {
            let cut = max + p.min_p.ln();
            let keep = self.cand.iter().take_while(|c| c.0 >= cut).count().max(1);
            self.cand.truncate(keep);
        }
        max
    }

    /// The rule behind `pick`, `verify` and `verify_with_q`: a draft token and, for a draft
    /// model, its distribution q (None: q is one-hot at the draft).
    /// A draw from the candidates (after `filter`: `max` their largest logit, `total` the sum of
    /// their weights), or after a rejected draft from the residual: p − q clipped at 0 (for a
    /// one-hot q, p without the draft).
    fn draw_residual(
        &mut self,
        max: f32,
        total: f64,
        residual: Option<(u32, Option<&[f32]>)>,
    ) -> u32 {
        let weight = |c: &(f32, u32)| ((c.0 - max) as f64).exp();
        // In the units of `weight`, so that plain sampling draws exactly as it always has.
        let r = |c: &(f32, u32)| -> f64 {
            match residual {
                None => weight(c),
                Some((d, None)) => {
                    if c.1 == d {
                        0.0
                    } else {
                        weight(c)
                    }
                }
                Some((_, Some(q))) => {
                    let q = q.get(c.1 as usize).copied().unwrap_or(0.0) as f64;
                    (weight(c) - q * total).max(0.0)
                }
            }
        };
        let mass: f64 = match residual {
            None => total,
            _ => self.cand.iter().map(r).sum(),
        };
        let mut u = self.rng.next_f64() * mass;
        let mut id = match residual {
            None => self.cand.last().map_or(0, |c| c.1),
            _ => (self.cand.iter().rev().find(|c| r(c) > 0.0))
                .or(self.cand.first())
                .map_or(0, |c| c.1),
        };
        for c in &self.cand {
            u -= r(c);
            if u < 0.0 {
                id = c.1;
                break;
            }
        }
        id
    }

    fn verify_against(
        &mut self,
        logits: &mut [f32],
        history: &[u32],
        draft: Option<(u32, Option<&[f32]>)>,
        n_top: usize,
        top: &mut Vec<Candidate>,
    ) -> (u32, bool) {
        top.clear();
        self.picked = None;
        self.apply_repetition_penalty(logits, history);
        let params = self.params.clone();
        if params.is_greedy() {
            let id = argmax(logits);
            if n_top > 0 {
                self.gather(logits, 1.0, false);
                self.truncate_and_normalise(n_top, top);
                self.picked = top.first().map(|c| c.prob);
            }
            return (id, draft.map(|d| d.0) == Some(id));
        }
        let restrict = params.top_k > 0 || params.top_p < 1.0 || params.min_p > 0.0;
        let max = self.filter(logits);
        let weight = |c: &(f32, u32)| ((c.0 - max) as f64).exp();
        let total: f64 = self.cand.iter().map(weight).sum();
        // p after a rejected draft: p − q clipped at 0 (for a one-hot q, p without the draft).
        let mut residual: Option<(u32, Option<&[f32]>)> = None;
        let mut chosen = None;
        if let Some((d, q)) = draft {
            let p_d = self.cand.iter().find(|c| c.1 == d).map_or(0.0, weight) / total;
            let q_d = q.map_or(1.0, |q| q.get(d as usize).copied().unwrap_or(0.0) as f64);
            let keep = if q_d > 0.0 { (p_d / q_d).min(1.0) } else { 1.0 };
            if self.rng.next_f64() < keep {
                chosen = Some((d, true));
            } else {
                residual = Some((d, q));
            }
        }
        let (id, accepted) = match chosen {
            Some(c) => c,
            None => (self.draw_residual(max, total, residual), false),
        };
        if n_top > 0 {
            let p = self.cand.iter().find(|c| c.1 == id).map_or(0.0, weight) / total;
            self.picked = Some(p as f32);
            if !restrict {
                self.sort_candidates();
            }
            self.truncate_and_normalise(n_top, top);
        }
        (id, accepted)
    }

    /// Collects (logit / temperature, id) into `cand`; sorted descending when `sorted`.
    fn gather(&mut self, logits: &[f32], temperature: f32, sorted: bool) {
        let all = (logits.iter().enumerate()).map(|(i, &l)| (l, i as u32));
        self.gather_from(all, temperature, sorted);
    }

    /// `gather` over (logit, id) pairs: the whole row's, or the largest of it (`pick_top`).
    fn gather_from(
        &mut self,
        logits: impl Iterator<Item = (f32, u32)> + Clone,
        temperature: f32,
        sorted: bool,
    ) {
        self.cand.clear();
        let max = logits.clone().fold(f32::NEG_INFINITY, |m, c| m.max(c.0));
        let inv_t = 1.0 / temperature;
        let floor = if sorted {
            (max - NEGLIGIBLE * temperature) * inv_t
        } else {
            f32::NEG_INFINITY
        };
        self.cand.extend(
            logits
                .map(|(l, i)| (l * inv_t, i))
                .filter(|c| c.0 >= floor && !c.0.is_nan()),
        );
        if sorted {
            self.sort_candidates();
        }
    }

    fn sort_candidates(&mut self) {
        // Ties broken by id so the order never depends on the sort algorithm.
        self.cand
            .sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    }

    /// Writes the first `n` candidates with their probability under the current candidate set.
    fn truncate_and_normalise(&mut self, n: usize, top: &mut Vec<Candidate>) {
        if self.cand.len() > n && self.cand.windows(2).any(|w| w[0].0 < w[1].0) {
            self.sort_candidates();
        }
        let max = self.cand.first().map_or(0.0, |c| c.0);
        let total: f64 = self.cand.iter().map(|c| ((c.0 - max) as f64).exp()).sum();
        top.extend(self.cand.iter().take(n).map(|c| Candidate {
            id: c.1,
            prob: (((c.0 - max) as f64).exp() / total) as f32,
        }));
    }
}

/// The `k` largest of `row` as (value, index) into `out` (appended, unsorted): larger by
/// `f32::total_cmp`, of equal ones the smaller index, NaN never before a number (the order
/// `Sampler`'s sort gives its candidates, so they are its first k). All of `row` if shorter.
pub fn top_k(row: &[f32], k: usize, out: &mut Vec<(f32, u32)>) {
    let mut all: Vec<(f32, u32)> = (row.iter().enumerate())
        .map(|(i, &x)| (x, i as u32))
        .collect();
    let before = |a: &(f32, u32), b: &(f32, u32)| {
        let rank = |x: f32| (x.is_nan(), std::cmp::Reverse(crate::sampling::Total(x)));
        rank(a.0).cmp(&rank(b.0)).then(a.1.cmp(&b.1))
    };
    let k = k.min(all.len());
    if k > 0 && k < all.len() {
        all.select_nth_unstable_by(k - 1, before);
    }
    out.extend_from_slice(&all[..k]);
}

/// An f32 ordered by `total_cmp`.
#[derive(PartialEq)]
struct Total(f32);

impl Eq for Total {}

impl PartialOrd for Total {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Total {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Index of the largest value; the first one on ties, as `torch.argmax`.
pub fn argmax(xs: &[f32]) -> u32 {
    // Lanes, each over every LANES-th value, that the compiler keeps in vector registers: each
    // holds the first index of its largest value above −∞ (a NaN is never larger), and the lanes
    // then give the first index of the largest of all. The same answer as `argmax_in_order`.
    const LANES: usize = 8;
    if xs.len() < 2 * LANES || xs[0].is_nan() {
        return argmax_in_order(xs);
    }
    let (mut value, mut index) = ([f32::NEG_INFINITY; LANES], [u32::MAX; LANES]);
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for (c, chunk) in chunks.enumerate() {
        for j in 0..LANES {
            let larger = chunk[j] > value[j];
            value[j] = if larger { chunk[j] } else { value[j] };
            index[j] = if larger {
                (c * LANES + j) as u32
            } else {
                index[j]
            };
        }
    }
    let (mut best, mut at) = (xs[0], 0u32);
    for (&v, &i) in value.iter().zip(&index) {
        if v > best || (v == best && i < at) {
            (best, at) = (v, i);
        }
    }
    let start = xs.len() - tail.len();
    for (k, &x) in tail.iter().enumerate() {
        if x > best {
            (best, at) = (x, (start + k) as u32);
        }
    }
    at
}

/// The index of the first largest value, in one pass in order (a NaN is never larger; with a
/// NaN first, 0): what `argmax` gives.
fn argmax_in_order(xs: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests;
