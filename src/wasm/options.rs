//! The generate options as the JS API spells them (camelCase, JS numbers), checked and turned
//! into the engine's `GenerateParams`. tests/e2e/options.test.mjs checks their names, types and
//! defaults against www/gpt2.js and www/gpt2.d.ts.

use super::{js_err, param_error};
use crate::generate::GenerateParams;
use crate::sampling::SamplingParams;
use serde::Deserialize;
use wasm_bindgen::JsValue;

/// Generation options as the JS API spells them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub(super) struct Options {
    max_tokens: f64,
    temperature: f32,
    top_k: f64,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    seed: f64,
    stop: Vec<String>,
    top_logprobs: f64,
    ignore_eos: bool,
    profile: bool,
    draft: String,
    draft_tokens: f64,
    kv_cache: bool,
    num_beams: f64,
    length_penalty: f32,
    early_stopping: serde_json::Value,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_tokens: 64.0,
            temperature: 0.0,
            top_k: 0.0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            seed: 0.0,
            stop: Vec::new(),
            top_logprobs: 0.0,
            ignore_eos: false,
            profile: false,
            draft: "none".into(),
            draft_tokens: 8.0,
            kv_cache: true,
            num_beams: 1.0,
            length_penalty: 1.0,
            early_stopping: serde_json::Value::Bool(false),
        }
    }
}

/// A non-negative whole number from a JS number, or an error naming the option.
fn whole(name: &'static str, v: f64, max: f64) -> Result<u64, JsValue> {
    if v.fract() != 0.0 || !(0.0..=max).contains(&v) {
        return Err(param_error(&format!(
            "invalid {name}: {v} is not a whole number in 0..={max}"
        )));
    }
    Ok(v as u64)
}

impl Options {
    pub fn from_js(options: JsValue) -> Result<Options, JsValue> {
        if options.is_undefined() || options.is_null() {
            return Ok(Options::default());
        }
        serde_wasm_bindgen::from_value(options)
            .map_err(|e| param_error(&format!("invalid options: {e}")))
    }

    /// Whether the phases are timed (`profile: true`).
    pub fn profile(&self) -> bool {
        self.profile
    }

    pub fn params(&self) -> Result<GenerateParams, JsValue> {
        let params = GenerateParams {
            max_tokens: whole("maxTokens", self.max_tokens, 1e9)? as usize,
            sampling: SamplingParams {
                temperature: self.temperature,
                top_k: whole("topK", self.top_k, 1e9)? as usize,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                seed: whole("seed", self.seed, 9007199254740991.0)?,
            },
            stop: self.stop.clone(),
            top_logprobs: whole("topLogprobs", self.top_logprobs, 100.0)? as usize,
            ignore_eos: self.ignore_eos,
            // "model": a loaded draft model that gpt2.js passes to the worker beside the options.
            draft: match self.draft.as_str() {
                "model" => crate::Draft::Model,
                other => other.parse().map_err(js_err)?,
            },
            draft_tokens: whole("draftTokens", self.draft_tokens, 1e9)? as usize,
            kv_cache: self.kv_cache,
            num_beams: whole("numBeams", self.num_beams, 1e9)? as usize,
            length_penalty: self.length_penalty,
            early_stopping: match &self.early_stopping {
                serde_json::Value::Bool(false) => crate::EarlyStopping::Heuristic,
                serde_json::Value::Bool(true) => crate::EarlyStopping::Yes,
                serde_json::Value::String(s) if s == "never" => crate::EarlyStopping::Never,
                other => {
                    return Err(param_error(&format!(
                        "invalid earlyStopping: {other}; expected true, false or \"never\""
                    )))
                }
            },
        };
        params.validate().map_err(js_err)?;
        Ok(params)
    }
}
