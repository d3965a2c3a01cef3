//! Speculative decoding's drafting side: where guesses of the next tokens come from, and how many
//! to make. The loop (`generate`) checks a draft with one forward over all of it (the
//! verification pass) and keeps the longest prefix the model agrees with, plus the model's own
//! next token, so one model step can produce several tokens; the sampler's `verify` keeps the
//! output exactly what plain decoding would give (greedy) or be distributed as it (sampling).
//!
//! Prompt lookup (Saxena 2023; transformers' `prompt_lookup_num_tokens`): find the last few
//! tokens earlier in the prompt or the text so far and propose what followed them there. No
//! second model: it wins where the continuation quotes or repeats, which GPT-2's greedy text
//! often does, and costs nothing where it finds no match.

use crate::error::{Error, Result};

/// Where draft tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Draft {
    /// No speculation: one token per model step.
    #[default]
    None,
    /// n-gram lookup in the prompt and the text so far.
    PromptLookup,
    /// A smaller model with the same vocabulary, given to `Generation::next`, drafts with
    /// the same sampler settings.
    Model,
    /// The model's own multi-token prediction heads (`crate::mtp`): guesses of the tokens after
    /// the next from the last position's hidden state.
    Mtp,
}

impl std::str::FromStr for Draft {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" | "" => Ok(Draft::None),
            "prompt-lookup" => Ok(Draft::PromptLookup),
            "mtp" => Ok(Draft::Mtp),
            other => Err(Error::param(
                "draft",
                format!("\"{other}\"; expected prompt-lookup, mtp or none"),
            )),
        }
    }
}

impl Draft {
    pub fn as_str(self) -> &'static str {
        match self {
            Draft::None => "none",
            Draft::PromptLookup => "prompt-lookup",
            Draft::Model => "model",
            Draft::Mtp => "mtp",
        }
    }
}

/// The longest n-gram prompt lookup matches, and the shortest.
const MAX_NGRAM: usize = 3;
const MIN_NGRAM: usize = 1;

/// Up to `k` tokens that followed the latest earlier occurrence of the longest suffix of `ids`
/// (MAX_NGRAM down to MIN_NGRAM tokens) that occurs earlier; empty when none does.
pub fn prompt_lookup(ids: &[u32], k: usize, out: &mut Vec<u32>) {
    out.clear();
    if k == 0 {
        return;
    }
    for n in (MIN_NGRAM..=MAX_NGRAM.min(ids.len().saturating_sub(1))).rev() {
        let tail = &ids[ids.len() - n..];
        // Latest first: the most recent context is the likeliest to continue alike.
        let found = (0..ids.len() - n).rev().find(|&i| &ids[i..i + n] == tail);
        if let Some(i) = found {
            let from = i + n;
            out.extend_from_slice(&ids[from..(from + k).min(ids.len())]);
            return;
        }
    }
}

/// How many tokens to draft: grows by one after a draft kept whole, halves after one rejected at
/// its first token. At one token, three such rejections in a row pause drafting for 8 model steps
/// (16, 32, … up to 256 if it keeps failing; a kept draft resets it), after which one token is
/// tried again. So a drafter that never agrees with the model costs a few steps in hundreds, and
/// one that starts to agree is found again.
#[derive(Clone, Debug)]
pub struct DraftLength {
    k: usize,
    max: usize,
    misses: usize,
    pause: usize,
    backoff: usize,
}

/// Model steps without a draft after the first run of failures at one token.
const FIRST_PAUSE: usize = 8;
const LONGEST_PAUSE: usize = 256;

impl DraftLength {
    pub fn new(max: usize) -> DraftLength {
        DraftLength {
            k: max.clamp(1, 4),
            max,
            misses: 0,
            pause: 0,
            backoff: FIRST_PAUSE,
        }
    }

    /// Tokens to draft now (0 when `max` is 0 or drafting is paused).
    pub fn get(&self) -> usize {
        if self.max == 0 || self.pause > 0 {
            0
        } else {
            self.k
        }
    }

    /// After a model step with a draft of `drafted` tokens of which `accepted` were kept
    /// (`drafted` 0: a step without a draft).
    pub fn update(&mut self, drafted: usize, accepted: usize) {
        if self.max == 0 {
            return;
        }
        if drafted == 0 {
            self.pause = self.pause.saturating_sub(1);
            return;
        }
        if accepted == drafted {
            self.k = (self.k + 1).min(self.max);
            (self.misses, self.backoff) = (0, FIRST_PAUSE);
        } else if accepted == 0 {
            if self.k == 1 {
                self.misses += 1;
                if self.misses == 3 {
                    self.pause = self.backoff;
                    self.backoff = (self.backoff * 2).min(LONGEST_PAUSE);
                    self.misses = 0;
                }
            }
            self.k = (self.k / 2).max(1);
        } else {
            self.misses = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_lookup_proposes_what_followed_the_latest_match() {
        let mut out = Vec::new();
        // "1 2 3 4 … 1 2 3" → "4 9": the trigram 1 2 3 was followed by 4 9 … the first time.
        prompt_lookup(&[1, 2, 3, 4, 9, 7, 1, 2, 3], 2, &mut out);
        assert_eq!(out, [4, 9]);
        // The latest match wins: 5 was followed by 6 once and by 8 later.
        prompt_lookup(&[5, 6, 0, 5, 8, 0, 5], 3, &mut out);
        assert_eq!(out, [8, 0, 5]);
        // No earlier occurrence of the last token: no draft.
        prompt_lookup(&[1, 2, 3], 4, &mut out);
        assert!(out.is_empty());
        prompt_lookup(&[7], 4, &mut out);
        assert!(out.is_empty());
        // Never past the end of what exists.
        prompt_lookup(&[4, 4], 5, &mut out);
        assert_eq!(out, [4]);
    }

    #[test]
    fn the_draft_length_grows_when_kept_and_shrinks_when_rejected() {
        let mut k = DraftLength::new(8);
        assert_eq!(k.get(), 4);
        k.update(4, 4);
        assert_eq!(k.get(), 5);
        k.update(5, 0);
        assert_eq!(k.get(), 2);
        k.update(2, 1); // partly kept: unchanged
        assert_eq!(k.get(), 2);
        for _ in 0..10 {
            k.update(k.get(), k.get());
        }
        assert_eq!(k.get(), 8);
        for _ in 0..4 {
            k.update(k.get(), 0); // 8 → 4 → 2 → 1 → 1 (a first miss at one token)
        }
        assert_eq!(k.get(), 1);
        k.update(1, 0);
        k.update(1, 0); // the third miss at one token: a pause
        for _ in 0..8 {
            assert_eq!(k.get(), 0);
            k.update(0, 0);
        }
        assert_eq!(k.get(), 1, "tried again after the pause");
        for _ in 0..3 {
            k.update(1, 0);
        }
        for _ in 0..16 {
            assert_eq!(k.get(), 0, "the second pause is twice as long");
            k.update(0, 0);
        }
        k.update(1, 1); // kept: drafting grows again and the pause resets
        assert_eq!(k.get(), 2);
        assert_eq!(DraftLength::new(0).get(), 0);
    }
}
