//! A completions request's JSON into the engine's job: the prompt (a text or token ids), the
//! generate options (each field the engine's option of that meaning, `FIELDS`, checked by its
//! table) and how to answer (a stream, usage, logprobs, the prompt echoed).

use super::ApiError;
use crate::generate::GenerateParams;
use crate::scheduler::Prompt;
use serde_json::{Map, Value};

/// Each request field that is an engine option, and that option's name
/// (src/generate/options.rs). `draft` is gpt2-web's own (speculative decoding by name); `top_k`,
/// `min_p`, `repetition_penalty` and `ignore_eos` are llama.cpp's server's and vLLM's extensions.
pub const FIELDS: [(&str, &str); 12] = [
    ("max_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("top_p", "top_p"),
    ("seed", "seed"),
    ("n", "n"),
    ("stop", "stop"),
    ("logprobs", "top_logprobs"),
    ("top_k", "top_k"),
    ("min_p", "min_p"),
    ("repetition_penalty", "repetition_penalty"),
    ("ignore_eos", "ignore_eos"),
    ("draft", "draft"),
];

/// Fields read here rather than passed to the engine.
const OWN: [&str; 4] = ["prompt", "stream", "stream_options", "echo"];
/// Fields taken and not needed: the model is the one served; `user` is for a provider's logs.
const IGNORED: [&str; 2] = ["model", "user"];
/// Whether a field's value changes nothing.
type Neutral = fn(&Value) -> bool;
/// OpenAI's fields that would change the answer, accepted only at the value that changes nothing.
const NEUTRAL: [(&str, Neutral); 5] = [
    ("best_of", |v| v.as_f64() == Some(1.0)),
    ("suffix", |v| v.as_str() == Some("")),
    ("logit_bias", |v| v.as_object().is_some_and(Map::is_empty)),
    ("presence_penalty", |v| v.as_f64() == Some(0.0)),
    ("frequency_penalty", |v| v.as_f64() == Some(0.0)),
];
/// OpenAI's temperature runs 0 to 2, narrower than the engine's.
const MAX_TEMPERATURE: f64 = 2.0;

/// The request field of engine option `name` (as `FIELDS` pairs them); other names as they are,
/// and a prompt's token ids (`ids`) are the `prompt`.
pub(super) fn field_of(name: &str) -> &str {
    match name {
        "ids" => "prompt",
        _ => FIELDS.iter().find(|f| f.1 == name).map_or(name, |f| f.0),
    }
}

/// A completions request, read and checked.
#[derive(Clone, Debug)]
pub struct CompletionRequest {
    pub prompt: Prompt,
    /// OpenAI's defaults over the engine's: 16 tokens, temperature 1.
    pub params: GenerateParams,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
    /// `logprobs: k`: each token's logprob and the k most likely.
    pub logprobs: Option<usize>,
    /// The prompt's text before each choice's.
    pub echo: bool,
}

impl CompletionRequest {
    /// Reads a request's JSON. A field unknown, of the wrong type, out of range or not going
    /// with another is a 400 that names it.
    pub fn from_json(body: &Value) -> Result<Self, ApiError> {
        let Some(map) = body.as_object() else {
            return Err(ApiError::invalid(
                None,
                "the request body must be a JSON object",
            ));
        };
        check_fields(map)?;
        let mut params = GenerateParams {
            max_tokens: 16,
            temperature: 1.0,
            ..GenerateParams::default()
        };
        for (field, option) in FIELDS {
            match map.get(field) {
                None | Some(Value::Null) => {}
                Some(v) => set(&mut params, field, option, v)?,
            }
        }
        params.validate().map_err(ApiError::from)?;
        let flag = |name: &str| match map.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(ApiError::invalid(
                Some(name),
                format!("{name} must be true or false, not {v}"),
            )),
        };
        let (stream, echo) = (flag("stream")?, flag("echo")?);
        let include_usage = match map.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(o)) => o.get("include_usage") == Some(&Value::Bool(true)),
            Some(v) => {
                let msg = format!("stream_options must be an object, not {v}");
                return Err(ApiError::invalid(Some("stream_options"), msg));
            }
        };
        let logprobs =
            (params.top_logprobs > 0 || has(map, "logprobs")).then_some(params.top_logprobs);
        if logprobs.is_some() {
            // The events carry each token's probability only with candidates asked for.
            params.top_logprobs = params.top_logprobs.max(1);
        }
        if echo && logprobs.is_some() {
            let msg = "echo with logprobs would need the prompt's own logprobs, which are not \
                       computed here; leave one of them out";
            return Err(ApiError::invalid(Some("echo"), msg));
        }
        Ok(CompletionRequest {
            prompt: prompt(map.get("prompt"))?,
            params,
            stream,
            include_usage,
            logprobs,
            echo,
        })
    }
}

fn has(map: &Map<String, Value>, name: &str) -> bool {
    map.get(name).is_some_and(|v| !v.is_null())
}

/// Every field known: the engine's, the request's own, ignored ones, and OpenAI's others at
/// their neutral value.
fn check_fields(map: &Map<String, Value>) -> Result<(), ApiError> {
    for (key, v) in map {
        let known = FIELDS.iter().any(|f| f.0 == key) || OWN.contains(&key.as_str());
        if known || IGNORED.contains(&key.as_str()) || v.is_null() {
            continue;
        }
        match NEUTRAL.iter().find(|n| n.0 == key) {
            Some((_, neutral)) if neutral(v) => {}
            Some(_) => {
                let msg = format!("{key} {v} is not supported by gpt2-web (leave it out)");
                return Err(ApiError::invalid(Some(key), msg));
            }
            None => {
                let names: Vec<&str> = (FIELDS.iter().map(|f| f.0)).chain(OWN).collect();
                let msg = format!(
                    "unknown parameter \"{key}\"; the parameters are {}",
                    names.join(", ")
                );
                return Err(ApiError::invalid(Some(key), msg));
            }
        }
    }
    Ok(())
}

/// Field `field`'s value into engine option `option`, through the engine's table (its type);
/// the limits are checked after, with the rest (`validate`).
fn set(params: &mut GenerateParams, field: &str, option: &str, v: &Value) -> Result<(), ApiError> {
    let bad = |msg: String| ApiError::invalid(Some(field), format!("invalid {field}: {msg}"));
    let v = match (field, v) {
        // vLLM's top_k -1 is off: the engine's 0.
        ("top_k", v) if v.as_f64() == Some(-1.0) => Value::from(0),
        ("stop", Value::String(s)) => Value::from(vec![s.clone()]),
        ("stop", Value::Array(a)) if a.iter().all(Value::is_string) => v.clone(),
        ("stop", v) => return Err(bad(format!("{v}; expected a string or a list of strings"))),
        ("temperature", v) if v.as_f64().is_some_and(|t| t > MAX_TEMPERATURE) => {
            return Err(bad(format!("{v} is not in 0..={MAX_TEMPERATURE}")));
        }
        ("draft", Value::String(s)) if s == "model" => {
            return Err(bad(
                "\"model\" (a draft model) is not served; use prompt-lookup or mtp".into(),
            ));
        }
        _ => v.clone(),
    };
    params.set(option, &v).map_err(ApiError::from)
}

/// The prompt: a text, or token ids, alone or as the only item of a list; none is a new document
/// (the engine starts from end-of-text).
fn prompt(v: Option<&Value>) -> Result<Prompt, ApiError> {
    let bad = |msg: String| ApiError::invalid(Some("prompt"), msg);
    let ids = |a: &[Value]| -> Result<Vec<u32>, ApiError> {
        (a.iter())
            .map(|x| match x.as_u64() {
                Some(id) if id <= u32::MAX as u64 => Ok(id as u32),
                _ => Err(bad(format!("token id {x} is not a whole number from 0"))),
            })
            .collect()
    };
    match v {
        None | Some(Value::Null) => Ok(Prompt::Ids(Vec::new())),
        Some(Value::String(s)) => Ok(Prompt::Text(s.clone())),
        Some(Value::Array(a)) if a.iter().all(Value::is_number) => ids(a).map(Prompt::Ids),
        Some(Value::Array(a)) if a.len() == 1 => match &a[0] {
            Value::String(s) => Ok(Prompt::Text(s.clone())),
            Value::Array(inner) => ids(inner).map(Prompt::Ids),
            other => Err(bad(format!(
                "{other} is neither a text nor a list of token ids"
            ))),
        },
        Some(Value::Array(a)) => Err(bad(format!(
            "a list of {} prompts; send one prompt per request (a text or a list of token ids), \
             and n for several choices of it",
            a.len()
        ))),
        Some(other) => Err(bad(format!(
            "{other} is neither a text nor a list of token ids"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::OPTIONS;
    use serde_json::json;

    #[test]
    fn every_field_is_an_engine_option() {
        for (field, option) in FIELDS {
            assert!(
                OPTIONS.iter().any(|o| o.name == option),
                "{field} → {option}"
            );
            assert_eq!(field_of(option), field);
        }
    }

    #[test]
    fn openai_defaults_and_the_engine_check() {
        let r = CompletionRequest::from_json(&json!({ "prompt": "x" })).unwrap();
        assert_eq!((r.params.max_tokens, r.params.temperature), (16, 1.0));
        let e =
            CompletionRequest::from_json(&json!({ "prompt": "x", "logprobs": 101 })).unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("logprobs")));
        assert!(
            e.message.starts_with("invalid logprobs: 101"),
            "{}",
            e.message
        );
        let r = CompletionRequest::from_json(&json!({ "top_k": -1, "logprobs": 0 })).unwrap();
        assert_eq!(
            (r.params.top_k, r.logprobs, r.params.top_logprobs),
            (0, Some(0), 1)
        );
    }
}
