//! The generate options, each defined once: its name (Rust and JS), type, default, limits and one
//! line of documentation. From this table follow `GenerateParams` (the fields and `Default`), the
//! one check of every value (`GenerateParams::validate`, `set`), the JS API's parsing (`set` with
//! JSON values, errors named as JS spells the option), the CLI's flags and their defaults
//! (src/bin/gpt2/options.rs reads `OPTIONS`) and the TypeScript types (`generated.rs`
//! `render_dts`: the block of www/api/gpt2.d.ts that `cargo test --test generated` checks and
//! `GPT2_BLESS=1` rewrites). The lists of backends, dtypes, kernels and stop reasons follow from
//! their enums the same way (`generated.rs` `lists`: www/api/options.js and the same block).
//!
//! Adding an option is one row below plus the code that uses the field.

use super::batch::MAX_CHOICES;
use super::beam::{EarlyStopping, MAX_BEAMS};
use crate::error::{Error, Result};
use crate::sampling::SamplingParams;
use crate::speculate::Draft;
use serde_json::Value;

/// The largest whole number a JS number holds exactly (2⁵³ − 1).
pub const MAX_SAFE_INTEGER: f64 = 9007199254740991.0;

/// An option's numeric limits, checked by `validate`.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub min: f64,
    pub max: f64,
    /// `min` itself is out (`(min, max]`).
    pub min_open: bool,
}

/// `min..=max`.
const fn closed(min: f64, max: f64) -> Option<Limits> {
    Some(Limits {
        min,
        max,
        min_open: false,
    })
}

/// `(min, max]`.
const fn above(min: f64, max: f64) -> Option<Limits> {
    Some(Limits {
        min,
        max,
        min_open: true,
    })
}

/// Where an option is spelled: every caller, or only the JS API (the browser's CPU profile).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Js,
}

/// How an option's value is written: what the CLI makes of its flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A number, or a name or `true`/`false` (`--early-stopping never`).
    Value,
    /// On or off: a flag without a value (`--ignore-eos`, `--no-kv-cache`).
    Flag,
    /// Texts, any number of them (`--stop A --stop B`).
    Texts,
}

/// One generate option as the table defines it.
#[derive(Clone, Debug)]
pub struct OptionSpec {
    /// The Rust field, and the CLI's flag with `-` for `_`.
    pub name: &'static str,
    /// As the JS API spells it.
    pub js: &'static str,
    /// Its TypeScript type.
    pub ts: &'static str,
    pub kind: Kind,
    /// Whole numbers only.
    pub whole: bool,
    pub doc: &'static str,
    pub limits: Option<Limits>,
    pub scope: Scope,
}

/// A type an option can have: how it reads from JSON (the JS API, the CLI's flags) and writes
/// back (its default, in the generated files).
pub trait OptionValue: Sized {
    const TS: &'static str;
    const KIND: Kind = Kind::Value;
    /// Whole numbers only.
    const WHOLE: bool = false;
    fn from_json(v: &Value) -> std::result::Result<Self, String>;
    fn to_json(&self) -> Value;
    /// The value as a number, for the limits.
    fn number(&self) -> Option<f64> {
        None
    }
}

fn whole(v: &Value) -> std::result::Result<f64, String> {
    match v.as_f64() {
        Some(n) if n.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&n) => Ok(n),
        _ => Err(format!("{v} is not a whole number")),
    }
}

/// Whole numbers (counts and the seed), at most 2⁵³ − 1 so JS holds them exactly.
macro_rules! whole_number {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            const TS: &'static str = "number";
            const WHOLE: bool = true;
            fn from_json(v: &Value) -> std::result::Result<Self, String> {
                whole(v).map(|n| n as $t)
            }
            fn to_json(&self) -> Value {
                Value::from(*self)
            }
            fn number(&self) -> Option<f64> {
                Some(*self as f64)
            }
        }
    )*};
}

whole_number!(usize, u64);

impl OptionValue for f32 {
    const TS: &'static str = "number";
    fn from_json(v: &Value) -> std::result::Result<Self, String> {
        v.as_f64()
            .map(|n| n as f32)
            .ok_or(format!("{v} is not a number"))
    }
    fn to_json(&self) -> Value {
        // Through the shortest decimal, so 0.8f32 writes 0.8, not 0.800000011920929.
        serde_json::from_str(&self.to_string()).unwrap_or(Value::Null)
    }
    fn number(&self) -> Option<f64> {
        Some(*self as f64)
    }
}

impl OptionValue for bool {
    const TS: &'static str = "boolean";
    const KIND: Kind = Kind::Flag;
    fn from_json(v: &Value) -> std::result::Result<Self, String> {
        v.as_bool().ok_or(format!("{v} is not a boolean"))
    }
    fn to_json(&self) -> Value {
        Value::Bool(*self)
    }
}

/// A list of texts; a single text is a list of one.
impl OptionValue for Vec<String> {
    const TS: &'static str = "string[] | string";
    const KIND: Kind = Kind::Texts;
    fn from_json(v: &Value) -> std::result::Result<Self, String> {
        let texts = |items: &Vec<Value>| {
            let t: Option<Vec<String>> =
                items.iter().map(|s| s.as_str().map(String::from)).collect();
            t.ok_or(format!("{v} is not a list of strings"))
        };
        match v {
            Value::String(s) => Ok(vec![s.clone()]),
            Value::Array(items) => texts(items),
            _ => Err(format!("{v} is not a list of strings")),
        }
    }
    fn to_json(&self) -> Value {
        Value::from(self.clone())
    }
}

/// The JS API passes a loaded draft model as the model itself (`Gpt2`), which gpt2.js sends to
/// the worker as `'model'`.
impl OptionValue for Draft {
    const TS: &'static str = "'prompt-lookup' | 'mtp' | 'none' | Gpt2";
    fn from_json(v: &Value) -> std::result::Result<Self, String> {
        match v.as_str() {
            Some("model") => Ok(Draft::Model),
            Some(s) => s.parse().map_err(|e: Error| param_msg(e)),
            None => Err(format!("{v} is not a string")),
        }
    }
    fn to_json(&self) -> Value {
        Value::from(self.as_str())
    }
}

impl OptionValue for EarlyStopping {
    const TS: &'static str = "boolean | 'never'";
    fn from_json(v: &Value) -> std::result::Result<Self, String> {
        match v {
            Value::Bool(false) => Ok(EarlyStopping::Heuristic),
            Value::Bool(true) => Ok(EarlyStopping::Yes),
            Value::String(s) => s.parse().map_err(|e: Error| param_msg(e)),
            other => Err(format!("{other}; expected true, false or \"never\"")),
        }
    }
    fn to_json(&self) -> Value {
        match self {
            EarlyStopping::Heuristic => Value::Bool(false),
            EarlyStopping::Yes => Value::Bool(true),
            EarlyStopping::Never => Value::from("never"),
        }
    }
}

/// The message of a parameter error, without its "invalid NAME: ".
fn param_msg(e: Error) -> String {
    match e {
        Error::Param { msg, .. } => msg,
        other => other.to_string(),
    }
}

macro_rules! generate_options {
    ($(
        $(#[doc = $doc:literal])+
        $name:ident $js:literal $([$scope:ident])?: $ty:ty = $default:expr, $limits:expr;
    )*) => {
        /// What to generate: every generate option (`OPTIONS` documents each).
        #[derive(Clone, Debug, PartialEq)]
        pub struct GenerateParams {
            $( $(#[doc = $doc])+ pub $name: $ty, )*
        }

        impl Default for GenerateParams {
            fn default() -> Self {
                GenerateParams { $( $name: $default, )* }
            }
        }

        /// Every generate option, in the order the table defines them.
        pub const OPTIONS: &[OptionSpec] = &[$(
            OptionSpec {
                name: stringify!($name),
                js: $js,
                ts: <$ty as OptionValue>::TS,
                kind: <$ty as OptionValue>::KIND,
                whole: <$ty as OptionValue>::WHOLE,
                doc: concat!($($doc),+),
                limits: $limits,
                scope: generate_options!(@scope $($scope)?),
            },
        )*];

        impl GenerateParams {
            /// Sets the option `name` (as Rust or JS spells it) from a JSON value; a value of
            /// the wrong type is an error naming the option. Limits are `validate`'s.
            pub fn set(&mut self, name: &str, v: &Value) -> Result<()> {
                match name {
                    $( n if n == stringify!($name) || n == $js => {
                        self.$name = <$ty as OptionValue>::from_json(v)
                            .map_err(|m| Error::param(stringify!($name), m))?;
                    } )*
                    other => return Err(Error::param("options", format!(
                        "unknown option \"{other}\"; the options are {}",
                        OPTIONS.iter().map(|o| o.js).collect::<Vec<_>>().join(", ")
                    ))),
                }
                Ok(())
            }

            /// The option's value as JSON.
            pub fn get(&self, name: &str) -> Option<Value> {
                match name {
                    $( n if n == stringify!($name) || n == $js => Some(self.$name.to_json()), )*
                    _ => None,
                }
            }

            /// Each option within its limits.
            pub(super) fn check_limits(&self) -> Result<()> {
                $( check(stringify!($name), self.$name.number(), $limits)?; )*
                Ok(())
            }
        }
    };
    (@scope) => { Scope::All };
    (@scope js) => { Scope::Js };
}

generate_options! {
    /// Most tokens to generate.
    max_tokens "maxTokens": usize = 64, closed(1.0, 1e9);
    /// 0 = greedy (always the most likely token), as is anything below 1e-4; otherwise the logits are divided by it.
    temperature "temperature": f32 = 0.0, closed(0.0, 100.0);
    /// Keep only the k most likely tokens; 0 = off.
    top_k "topK": usize = 0, closed(0.0, 1e9);
    /// Nucleus sampling: keep the most likely tokens whose probabilities sum to p; 1 = off.
    top_p "topP": f32 = 1.0, above(0.0, 1.0);
    /// Drop tokens less likely than minP × the top token's probability; 0 = off.
    min_p "minP": f32 = 0.0, closed(0.0, 1.0);
    /// Penalise tokens already in the prompt or output (> 1 discourages repeats); 1 = off.
    repetition_penalty "repetitionPenalty": f32 = 1.0, above(0.0, 100.0);
    /// Seed of the sampler's random numbers: the same seed and options give the same text.
    seed "seed": u64 = 0, closed(0.0, MAX_SAFE_INTEGER);
    /// Generations of the prompt at once, as one batch: choice i samples with seed + i, so it equals a single generation with that seed (the plain loop: not with beams or a draft).
    n "n": usize = 1, closed(1.0, MAX_CHOICES as f64);
    /// Generation ends before any of these texts, which are not returned (at most 16, of at most 1000 bytes each).
    stop "stop": Vec<String> = Vec::new(), None;
    /// Give each token event the sampler's top candidates.
    top_logprobs "topLogprobs": usize = 0, closed(0.0, 100.0);
    /// Do not stop at end-of-text (for fixed-length measurements).
    ignore_eos "ignoreEos": bool = false, None;
    /// Time each phase of each CPU forward pass and return the sums as the result's profile (the GPU has none).
    profile "profile" [js]: bool = false, None;
    /// Speculative decoding: 'prompt-lookup' drafts from n-grams of the prompt and the text so far, 'mtp' from the model's own multi-token prediction heads (a model without them refuses it), a loaded smaller GPT-2 of the same vocabulary drafts with the same sampler settings; one forward pass checks each draft, and the output is the same as without (greedy) or has the same distribution (sampling).
    draft "draft": Draft = Draft::None, None;
    /// The most tokens one draft proposes (the length adapts below it).
    draft_tokens "draftTokens": usize = 8, closed(1.0, (crate::backend::MAX_VERIFY - 1) as f64);
    /// With draft 'mtp': let the heads draft even where this engine measured that they make decoding slower (`metrics.mtp` gives the verdict; without it such a generation runs the plain loop, the same tokens). For the lab and benchmarks.
    force_draft "forceDraft": bool = false, None;
    /// false: no KV cache, every step recomputes the whole sequence (the lesson's naive loop): the same tokens, a step that grows with the position. Not with draft.
    kv_cache "kvCache": bool = true, None;
    /// Prefix caching: start from the keys and values of the prompt's first tokens when an earlier generation on this model computed them (the same prompt again, a fixed preamble, a chat's history, the n choices), the same logits bit for bit; on the CPU in q8, where each row is computed alike in any pass (elsewhere the whole prompt runs). false: always run the whole prompt (to time prefill).
    prefix_cache "prefixCache": bool = true, None;
    /// Beam search with this many beams (1 = off), as transformers' generate(num_beams=N, do_sample=False): deterministic (temperature 0), not with draft; tokens are handed out once every beam that could still win agrees on them, and the result lists every finished beam.
    num_beams "numBeams": usize = 1, closed(1.0, MAX_BEAMS as f64);
    /// Beams are ranked by total log-probability / length ^ lengthPenalty (> 0 favours longer ones).
    length_penalty "lengthPenalty": f32 = 1.0, closed(-100.0, 100.0);
    /// When beam search stops: false (transformers' heuristic), true (as soon as numBeams beams finished) or 'never' (only when no running beam could beat them at any length).
    early_stopping "earlyStopping": EarlyStopping = EarlyStopping::Heuristic, None;
}

fn check(name: &'static str, v: Option<f64>, limits: Option<Limits>) -> Result<()> {
    let (Some(v), Some(l)) = (v, limits) else {
        return Ok(());
    };
    let low_ok = if l.min_open { v > l.min } else { v >= l.min };
    if v.is_finite() && low_ok && v <= l.max {
        return Ok(());
    }
    let range = match l.min_open {
        true => format!("({}, {}]", l.min, l.max),
        false => format!("{}..={}", l.min, l.max),
    };
    Err(Error::param(name, format!("{v} is not in {range}")))
}

/// The option `name` (as Rust spells it) as the JS API spells it; other names as they are.
pub fn js_name(name: &str) -> &str {
    OPTIONS
        .iter()
        .find(|o| o.name == name)
        .map_or(name, |o| o.js)
}

impl GenerateParams {
    /// Every option of a JSON object (the JS API's options, by either spelling), over the
    /// defaults; `null` or a missing option keeps its default. Checked: the error names the option.
    pub fn from_json(options: &Value) -> Result<GenerateParams> {
        let mut p = GenerateParams::default();
        match options {
            Value::Null => {}
            Value::Object(map) => {
                for (name, v) in map.iter().filter(|(_, v)| !v.is_null()) {
                    p.set(name, v)?;
                }
            }
            other => {
                return Err(Error::param(
                    "options",
                    format!("{other} is not an object of options"),
                ))
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// The sampler's settings.
    pub fn sampling(&self) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repetition_penalty: self.repetition_penalty,
            seed: self.seed,
        }
    }
}
