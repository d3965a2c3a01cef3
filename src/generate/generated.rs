//! What the options table generates for the JS side: www/api/options.js (`render_js`: the lists
//! of backends, dtypes, kernels and stop reasons, the limits, the ranges and the load options) and
//! the generated block of www/api/gpt2.d.ts (`render_dts`), both checked by
//! `cargo test --test generated` and rewritten by `GPT2_BLESS=1`. The table itself is
//! `options.rs`.

use super::options::*;
use serde_json::Value;

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
            doc: "Weight format: 'q8' or 'f32', on the CPU and on WebGPU; 'f16' on WebGPU (q8 on the CPU).",
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
