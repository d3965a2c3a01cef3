//! The generate options as the JS API passes them: a plain object read into the engine's
//! `GenerateParams` once, by the table that defines every option (src/generate/options.rs), when
//! the worker submits the request (`Scheduler.submit`).

use super::js_err;
use crate::generate::GenerateParams;
use serde_json::{Map, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

/// Reads and checks generate options (the JS API's names; undefined or null: the defaults), so
/// that a request is refused when it is submitted, not when its turn comes. The error names the
/// option as JS spells it.
pub(super) fn params_of(options: &JsValue) -> Result<GenerateParams, JsValue> {
    let json = to_json("options", options).map_err(|m| super::param_error(&m))?;
    GenerateParams::from_json(&json).map_err(js_err)
}

/// A JS value as JSON, refusing what JSON cannot say (NaN, Infinity, functions) with a sentence
/// naming the option, rather than turning it into null as JSON.stringify would.
fn to_json(name: &str, v: &JsValue) -> Result<Value, String> {
    if v.is_undefined() || v.is_null() {
        return Ok(Value::Null);
    }
    if let Some(b) = v.as_bool() {
        return Ok(Value::Bool(b));
    }
    if let Some(n) = v.as_f64() {
        // A whole number as an integer, so that it reads back as JS wrote it (3, not 3.0).
        if n.fract() == 0.0 && n.abs() <= crate::generate::options::MAX_SAFE_INTEGER {
            return Ok(Value::from(n as i64));
        }
        return serde_json::Number::from_f64(n)
            .map(Value::Number)
            .ok_or(format!("invalid {name}: {n} is not a number"));
    }
    if let Some(s) = v.as_string() {
        return Ok(Value::String(s));
    }
    if js_sys::Array::is_array(v) {
        let items = js_sys::Array::from(v);
        return items.iter().map(|x| to_json(name, &x)).collect();
    }
    if v.is_function() {
        return Err(format!(
            "invalid {name}: a function is not an option's value"
        ));
    }
    let Some(obj) = v.dyn_ref::<js_sys::Object>() else {
        return Err(format!("invalid {name}: {v:?} is not an option's value"));
    };
    let mut map = Map::new();
    for entry in js_sys::Object::entries(obj).iter() {
        let pair = js_sys::Array::from(&entry);
        let key = pair.get(0).as_string().unwrap_or_default();
        let value = to_json(&key, &pair.get(1))?;
        map.insert(key, value);
    }
    Ok(Value::Object(map))
}
