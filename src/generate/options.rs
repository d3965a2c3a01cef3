//! The generate options, each defined once: its name (Rust and JS), type, default, limits and one
//! line of documentation. From this table follow `GenerateParams` (the fields and `Default`), the
//! one check of every value (`GenerateParams::validate`, `set`), the JS API's parsing (`set` with
//! JSON values, errors named as JS spells the option), the CLI's flags and their defaults
//! (src/bin/gpt2/options.rs reads `OPTIONS`) and the TypeScript types (`render_dts`: the block
//! of www/api/gpt2.d.ts that `cargo test --test generated` checks and `GPT2_BLESS=1` rewrites). The
//! lists of backends, dtypes, kernels and stop reasons follow from their enums the same way
//! (`lists`: www/api/options.js and the same block).
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

/// How a default reads in JS (`64`, `'none'`, `false`).
fn js_literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

const GENERATED: &str =
    "Generated from src/generate/options.rs by `GPT2_BLESS=1 cargo test --test generated`; do not edit.";

/// A list of names the JS API takes or reports, as www/api/options.js (`js`) and gpt2.d.ts (`ts`)
/// name it.
pub struct List {
    pub js: &'static str,
    pub ts: &'static str,
    pub doc: &'static str,
    pub items: Vec<&'static str>,
}

/// The lists beside the options: each from the enum that defines it.
pub fn lists() -> Vec<List> {
    use crate::backend::cpu::q8::WASM_KERNELS;
    let stops = super::StopReason::ALL.iter().map(|s| s.as_str()).collect();
    vec![
        List {
            js: "BACKENDS",
            ts: "BackendChoice",
            doc: "Which backend to run on. 'auto' picks WebGPU when a hardware adapter is available and the model fits, else the CPU (a software adapter such as SwiftShader is slower than the CPU backend, so 'auto' never picks one). 'webgpu' takes any adapter, and load rejects when there is none.",
            items: crate::backend::BACKEND_NAMES.to_vec(),
        },
        List {
            js: "DTYPES",
            ts: "Dtype",
            doc: "Weight format: 'q8' or 'f32' on the CPU (WebGPU then runs f32); 'f16' on WebGPU (q8 on the CPU).",
            items: crate::backend::DTYPE_NAMES.to_vec(),
        },
        List {
            js: "KERNELS",
            ts: "Kernel",
            doc: "The CPU's 8-bit kernel in the browser: 'auto' (the engine's choice) or one by name.",
            items: std::iter::once("auto").chain(WASM_KERNELS).collect(),
        },
        List {
            js: "ERROR_CODES",
            ts: "Gpt2ErrorCode",
            doc: "The kind of failure a rejected promise's Error carries as `code` (decide by it, not by the sentence; Error::code in src/error.rs): 'param' an option out of range, 'gpu' a WebGPU failure, after which 'auto' runs on the CPU, 'memory' an allocation refused, 'budget' the memory budget refusing a model, 'state' the engine used out of turn, 'busy' the model's queue is full (LIMITS.maxQueue requests wait; try again later), 'crash' a trap inside WebAssembly (load the model again), …",
            items: crate::error::CODES.to_vec(),
        },
        List {
            js: "WASM_BUILDS",
            ts: "WasmBuild",
            doc: "The wasm builds (./build.sh): 'pkg' (simd128, every engine), 'pkg-relaxed' (relaxed SIMD), 'pkg-threads' (relaxed SIMD and threads, on a cross-origin isolated page).",
            items: vec!["pkg", "pkg-relaxed", "pkg-threads"],
        },
        List {
            js: "STOP_REASONS",
            ts: "StopReason",
            doc: "Why generation ended.",
            items: stops,
        },
    ]
}

fn quoted(items: &[&str], sep: &str) -> String {
    items
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(sep)
}

/// The scheduler's limits, as the JS API names them: (name, value, doc).
pub fn limits() -> [(&'static str, usize, &'static str); 3] {
    [
        ("maxBatch", super::MAX_BATCH, "the most generations of one model that share a step"),
        ("maxQueue", super::MAX_QUEUE, "the most requests (each choice of n counts) that wait for one model; more are refused with code 'busy'"),
        ("maxChoices", super::MAX_CHOICES, "the most choices (n) of one call"),
    ]
}

/// www/api/options.js: the lists the JS API checks `Gpt2.load`'s arguments against, and the
/// scheduler's limits.
pub fn render_js() -> String {
    let mut s = format!("// {GENERATED}\n");
    for l in lists() {
        let items = quoted(&l.items, ", ");
        let doc = wrap_doc(l.doc, "");
        s += &format!("\n{doc}export const {} = Object.freeze([{items}]);\n", l.js);
    }
    let items: Vec<String> = limits()
        .iter()
        .map(|(k, v, _)| format!("{k}: {v}"))
        .collect();
    s += &format!(
        "\n{}export const LIMITS = Object.freeze({{ {} }});\n",
        limits_doc(),
        items.join(", ")
    );
    s += &render_ranges_js();
    s += &render_load_js();
    s
}

/// The generate options' numeric ranges and defaults, for every input, attribute and preset.
fn render_ranges_js() -> String {
    let defaults = GenerateParams::default();
    let mut s = String::from(
        "\n/**\n * Each numeric generate option's range and default, as the engine checks them: `min..=max`, or\n * `(min, max]` where `minOpen`; `whole` for whole numbers. Every page input, widget attribute and\n * preset follows it (tests/e2e/ranges.test.mjs).\n */\nexport const RANGES = Object.freeze({\n",
    );
    for o in OPTIONS.iter().filter(|o| o.limits.is_some()) {
        let Some(l) = o.limits else { continue };
        let d = defaults.get(o.name).unwrap_or(Value::Null);
        s += &format!(
            "  {}: Object.freeze({{ min: {}, max: {}, minOpen: {}, whole: {}, default: {d} }}),\n",
            o.js, l.min, l.max, l.min_open, o.whole
        );
    }
    s + "});\n"
}

/// `Gpt2.load`'s options and how each is checked (src/model/load_options.rs).
fn render_load_js() -> String {
    use crate::model::load_options::{Check, LOAD_OPTIONS};
    let mut s = String::from(
        "\n/** Gpt2.load's options and how gpt2.js checks each (an unknown one is refused). */\nexport const LOAD_OPTIONS = Object.freeze({\n",
    );
    for o in LOAD_OPTIONS {
        let check = match o.check {
            Check::Any => "{ check: 'any' }".to_string(),
            Check::Text => "{ check: 'text' }".to_string(),
            Check::List(list) => format!("{{ check: 'list', list: {list} }}"),
            Check::Whole { min, max } => format!("{{ check: 'whole', min: {min}, max: {max} }}"),
            Check::Number { min } => format!("{{ check: 'number', min: {min} }}"),
            Check::Bool => "{ check: 'boolean' }".to_string(),
            Check::Function => "{ check: 'function' }".to_string(),
            Check::Signal => "{ check: 'signal' }".to_string(),
        };
        s += &format!("  {}: Object.freeze({check}),\n", o.js);
    }
    s + "});\n"
}

fn limits_doc() -> String {
    let docs: Vec<String> = limits()
        .iter()
        .map(|(k, _, d)| format!("{k}: {d}."))
        .collect();
    let text = format!("The engine's limits (src/scheduler): {}", docs.join(" "));
    wrap_doc(&text, "")
}

/// The generated block of gpt2.d.ts: the lists' types and `EngineOptions` (the generate
/// options the engine reads; `GenerateOptions` adds signal and onToken).
pub fn render_dts() -> String {
    let defaults = GenerateParams::default();
    let mut s = format!("// {GENERATED}\n");
    for l in lists() {
        let ty = quoted(&l.items, " | ");
        s += &format!("\n{}export type {} = {ty};\n", wrap_doc(l.doc, ""), l.ts);
    }
    let keys: Vec<String> = limits()
        .iter()
        .map(|(k, _, _)| format!("{k}: number"))
        .collect();
    s += &format!(
        "\n{}export declare const LIMITS: Readonly<{{ {} }}>;\n",
        limits_doc(),
        keys.join("; ")
    );
    s += "\n/** The options of Gpt2.load (src/model/load_options.rs). */\n";
    s += "export interface LoadOptions {\n";
    for o in crate::model::load_options::LOAD_OPTIONS {
        s += &wrap_doc(o.doc, "  ");
        s += &format!("  {}?: {};\n", o.js, o.ts);
    }
    s += "}\n";
    s += "\n/** The generate options the engine reads (GenerateOptions adds signal and onToken). */\n";
    s += "export interface EngineOptions {\n";
    for o in OPTIONS {
        let d = defaults.get(o.name).unwrap_or(Value::Null);
        let dflt = match &d {
            Value::Array(a) if a.is_empty() => "none".to_string(),
            other => js_literal(other),
        };
        let range = o.limits.map(|l| match l.min_open {
            true => format!(" In ({}, {}].", l.min, l.max),
            false => format!(" In {}..={}.", l.min, l.max),
        });
        let doc = format!("{}{} Default {dflt}.", o.doc, range.unwrap_or_default());
        s += &wrap_doc(&doc, "  ");
        s += &format!("  {}?: {};\n", o.js, o.ts);
    }
    s += "}\n";
    s
}

/// A doc comment at the indentation `pad`, wrapped at about 100 columns.
fn wrap_doc(text: &str, pad: &str) -> String {
    let mut lines: Vec<String> = vec![String::new()];
    for word in text.split_whitespace() {
        let last = lines.last_mut().expect("lines starts with one line");
        if !last.is_empty() && last.len() + word.len() + 1 > 92 {
            lines.push(word.to_string());
        } else {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(word);
        }
    }
    if lines.len() == 1 {
        return format!("{pad}/** {} */\n", lines[0]);
    }
    let body: String = lines.iter().map(|l| format!("{pad} * {l}\n")).collect();
    format!("{pad}/**\n{body}{pad} */\n")
}
