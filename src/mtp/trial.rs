//! Whether a model's multi-token prediction heads pay on this engine: timed by the first greedy
//! `draft: 'mtp'` generations in alternating drafted and plain blocks, or remembered by a front
//! end from an earlier visit.

use crate::error::{Error, Result};

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
