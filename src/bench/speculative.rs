//! Speculative decoding as a benchmark: each drafter against plain greedy on the same prompts —
//! model steps, accepted draft tokens and the time — and the multi-token heads' own guess time.

use super::runs::{alone, median};
use crate::error::Result;
use crate::generate::GenerateParams;
use crate::model::Model;
use serde::Serialize;

/// One prompt of the speculative benchmark.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct SpecPrompt {
    pub name: String,
    /// "repeating" (the continuation quotes or repeats the prompt) or "ordinary".
    pub kind: String,
    pub prompt: String,
}

/// Plain greedy decoding against speculative greedy decoding with a drafter, on one prompt.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecRun {
    pub name: String,
    pub kind: String,
    pub tokens: usize,
    pub target_forwards: usize,
    pub tokens_per_forward: f64,
    pub plain_ms: f64,
    pub speculative_ms: f64,
    /// plain ÷ speculative wall-clock: above 1, speculation is faster.
    pub speedup: f64,
    /// Whether the two texts are the same (greedy: they must be).
    pub identical: bool,
    /// With the heads (`draft: 'mtp'`, not forced): "on" when they drafted, "off" when the engine
    /// had measured that they lose and ran the plain loop, "measuring" while it measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heads: Option<&'static str>,
}

/// Each prompt plain and with `draft` (`force`: `forceDraft`), greedy, `tokens` new tokens,
/// median of 3 after a warm-up; the two runs of a repetition back to back.
pub fn speculative(
    model: &mut Model,
    mut draft_model: Option<&mut Model>,
    prompts: &[SpecPrompt],
    draft: crate::speculate::Draft,
    tokens: usize,
    force: bool,
) -> Result<Vec<SpecRun>> {
    let reps = 3;
    let params = |draft| GenerateParams {
        max_tokens: tokens,
        ignore_eos: true,
        prefix_cache: false, // plain and drafted runs both time the whole prompt
        draft,
        force_draft: force,
        ..Default::default()
    };
    let mut out = Vec::new();
    for p in prompts {
        let ids = model.tokenizer.encode(&p.prompt)?;
        let mut run = |model: &mut Model, d| {
            let dm = draft_model.as_deref_mut();
            alone(model, dm, ids.clone(), params(d), &mut |_| {})
        };
        run(model, draft)?; // warm-up
        let (mut plain, mut spec) = (Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..reps {
            let a = run(model, crate::speculate::Draft::None)?;
            let b = run(model, draft)?;
            plain.push(a.metrics.total_ms);
            spec.push(b.metrics.total_ms);
            last = Some((a, b));
        }
        let Some((a, b)) = last else { continue };
        let (plain_ms, speculative_ms) = (median(plain), median(spec));
        out.push(SpecRun {
            name: p.name.clone(),
            kind: p.kind.clone(),
            tokens: b.tokens.len(),
            target_forwards: b.metrics.target_forwards,
            tokens_per_forward: b.tokens.len() as f64 / b.metrics.target_forwards.max(1) as f64,
            plain_ms,
            speculative_ms,
            speedup: plain_ms / speculative_ms,
            identical: a.tokens == b.tokens,
            heads: b.metrics.mtp.as_ref().map(|h| match h.ran {
                "drafted" => "on",
                "plain" => "off",
                other => other,
            }),
        });
    }
    Ok(out)
}

/// The milliseconds the model's multi-token prediction heads take to guess from one hidden state
/// (all heads: their layers and the output product over the draft vocabulary), the median of
/// 201 calls; `None` without heads.
pub fn mtp_guess_ms(model: &mut Model) -> Option<f64> {
    let d = model.config.n_embd;
    let heads = model.mtp.as_mut()?;
    let h: Vec<f32> = (0..d)
        .map(|i| ((i * 7919) % 13) as f32 / 13.0 - 0.5)
        .collect();
    let mut out = Vec::new();
    let times = (0..201)
        .map(|_| {
            let t = crate::platform::now_ms();
            heads.guess(&h, heads.len(), 0.0, &mut out);
            crate::platform::now_ms() - t
        })
        .collect();
    Some(median(times))
}

/// The speculative benchmark as a table, with the geometric mean speed-up of each kind.
pub fn speculative_table(runs: &[SpecRun]) -> String {
    let mut s = format!(
        "{:<16} {:<10} {:>7} {:>9} {:>11} {:>10} {:>10} {:>8}{:4} {:>10}\n",
        "prompt",
        "kind",
        "tokens",
        "forwards",
        "tok/forward",
        "plain ms",
        "spec ms",
        "ratio",
        "",
        "same text"
    );
    for r in runs {
        s += &format!(
            "{:<16} {:<10} {:>7} {:>9} {:>11.2} {:>10.1} {:>10.1} {:>7.2}×{:<4} {:>10}\n",
            r.name,
            r.kind,
            r.tokens,
            r.target_forwards,
            r.tokens_per_forward,
            r.plain_ms,
            r.speculative_ms,
            r.speedup,
            match r.heads {
                Some("off") => " off",
                _ => "",
            },
            if r.identical { "yes" } else { "NO" }
        );
    }
    let mut kinds: Vec<&str> = Vec::new();
    for r in runs {
        if !kinds.contains(&r.kind.as_str()) {
            kinds.push(&r.kind);
        }
    }
    for kind in kinds {
        let of: Vec<f64> = runs
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| r.speedup.ln())
            .collect();
        let geo = (of.iter().sum::<f64>() / of.len() as f64).exp();
        s += &format!(
            "{kind}: geometric mean ratio {geo:.2}× over {} prompts\n",
            of.len()
        );
    }
    s
}
