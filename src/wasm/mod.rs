//! The WebAssembly API (wasm-bindgen), used by `www/worker.js`. Every error becomes a JS
//! `Error` whose message is the crate's sentence; panics are logged by console_error_panic_hook.
//!
//! A load makes an `Engine` (`EngineLoader`), which the worker hands to its one `Scheduler`
//! (`scheduler.rs`, over `crate::scheduler`): the worker then only pumps — requests in, `step`
//! between messages, each step's events out to the page.

mod loader;
mod options;
mod scheduler;
mod settings;

use crate::backend::{cpu::CpuDtype, BackendChoice};
use crate::model::Model;
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// `initThreadPool(n)` for the threaded build: starts rayon's `n` Web Workers. wasm-bindgen
/// exports it from the dependency; the re-export only documents where it comes from.
#[allow(unused_imports)]
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// A JS `Error` with `message`, and `code` when it is an engine error's kind (`Error::code`).
fn js_error(message: &str, code: Option<&str>) -> JsValue {
    let e = js_sys::Error::new(message);
    if let Some(code) = code {
        let _ = js_sys::Reflect::set(&e, &JsValue::from_str("code"), &JsValue::from_str(code));
    }
    e.into()
}

/// A JS `Error` for an option the JS API refuses: code `param`, as the engine's own.
fn param_error(message: &str) -> JsValue {
    js_error(message, Some("param"))
}

/// A JS `Error` of the API's own checks (no engine kind).
pub(crate) fn error(message: &str) -> JsValue {
    js_error(message, None)
}

pub(crate) fn js_err(e: crate::Error) -> JsValue {
    js_error(&sentence(&e), Some(e.code()))
}

/// An error's sentence for JS: parameters named as the JS API spells them.
fn sentence(e: &crate::Error) -> String {
    if let crate::Error::Param { name, msg } = e {
        let js = crate::generate::options::js_name(name);
        return format!("invalid {js}: {msg}");
    }
    e.to_string()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ConfigJs {
    n_layer: usize,
    n_head: usize,
    n_embd: usize,
    n_positions: usize,
    vocab_size: usize,
    n_params: usize,
    eos_token_id: u32,
}

impl ConfigJs {
    fn of(c: &crate::Config) -> Self {
        ConfigJs {
            n_layer: c.n_layer,
            n_head: c.n_head,
            n_embd: c.n_embd,
            n_positions: c.n_positions,
            vocab_size: c.vocab_size,
            n_params: c.n_params(),
            eos_token_id: c.eos_token_id,
        }
    }
}

fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| error(&e.to_string()))
}

/// A loaded model on its way to the scheduler (`Scheduler.add`), which then owns it.
#[wasm_bindgen]
pub struct Engine {
    model: Model,
}

#[wasm_bindgen]
impl Engine {
    /// Builds the model from the bytes of `config.json`, `model.safetensors` and
    /// `tokenizer.json` at once. `backend` is "auto", "cpu" or "webgpu"; `dtype` ("q8" or "f32")
    /// is the weight format on the CPU; `file` the weights file's name, which its errors give
    /// (`model.safetensors` when not given). (The worker streams the weights with `EngineLoader`.)
    pub async fn load(
        config: Vec<u8>,
        weights: Vec<u8>,
        tokenizer: Vec<u8>,
        backend: String,
        dtype: String,
        file: Option<String>,
    ) -> Result<Engine, JsValue> {
        let choice: BackendChoice = backend.parse().map_err(js_err)?;
        let dtype: CpuDtype = dtype.parse().map_err(js_err)?;
        let file = file.as_deref().unwrap_or("model.safetensors");
        let model = Model::from_bytes(&config, file, weights, &tokenizer, choice, dtype)
            .await
            .map_err(js_err)?;
        Ok(Engine { model })
    }

    pub(crate) fn new(model: Model) -> Engine {
        Engine { model }
    }
}
