//! The WebAssembly API (wasm-bindgen), used by `www/worker.js`. Every error becomes a JS
//! `Error` whose message is the crate's sentence; panics are logged by console_error_panic_hook.
//!
//! The worker drives generation one step at a time (`start`, then `step` until it returns
//! `undefined`), so it can post each token the moment it exists and notice an abort between steps.

mod loader;
mod options;
mod settings;

mod batch;
use options::Params;

use crate::backend::{cpu::CpuDtype, BackendChoice};
use crate::generate::{Batch, Generation, NextLogits};
use crate::model::Model;
use serde::Serialize;
use std::cell::RefCell;
use std::rc::Rc;
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
    // Parameters are named as the JS API spells them.
    if let crate::Error::Param { name, msg } = &e {
        let js = crate::generate::options::js_name(name);
        return js_error(&format!("invalid {js}: {msg}"), Some(e.code()));
    }
    js_error(&e.to_string(), Some(e.code()))
}

#[derive(Serialize)]
struct TopJs {
    id: u32,
    text: String,
    prob: f32,
}

/// A token event, its candidates with their text.
#[derive(Serialize)]
struct TokenJs {
    #[serde(flatten)]
    event: crate::TokenEvent,
    #[serde(skip_serializing_if = "Option::is_none")]
    top: Option<Vec<TopJs>>,
}

/// The crate's result (text, tokens, stopReason, metrics) and, with `profile: true` on the CPU,
/// where the prompt's forward and the steps' spent their time.
#[derive(Serialize)]
struct ResultJs {
    #[serde(flatten)]
    result: crate::GenerationResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<crate::backend::cpu::Profile>,
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

struct State {
    model: Model,
    generation: Option<Generation>,
    /// Generations stepped together (`join`, `stepBatch`): concurrent requests of the page.
    batch: Batch,
    /// What the KV cache holds for `logits` (the JS API's `model.logits`).
    next: NextLogits,
}

impl State {
    /// One step, with a draft model if given (a GPU failure continues on the CPU inside
    /// `Model::predict`).
    async fn step(&mut self, draft: Option<&mut Model>) -> crate::Result<crate::Progress> {
        let Some(g) = self.generation.as_mut() else {
            return Err(crate::Error::State(
                "no generation in progress: call start first".into(),
            ));
        };
        g.next(&mut self.model, draft).await
    }
}

impl State {
    /// The single-generation calls (`start`, `logits`) wait until the batch has emptied: they
    /// use the KV cache slot the batch's first member uses.
    fn no_batch(&self) -> Result<(), JsValue> {
        if self.batch.is_empty() {
            return Ok(());
        }
        Err(js_err(crate::Error::State(format!(
            "{} generations run as a batch; wait for them to finish",
            self.batch.len()
        ))))
    }
}

/// The engine's state, taken out while a step runs (`busy` if it already is).
fn take(cell: &Rc<RefCell<Option<State>>>) -> Result<State, JsValue> {
    cell.borrow_mut().take().ok_or_else(busy)
}

/// A step's outcome for JS: the token event with its candidates' text, `null` after a model step
/// that settled no token (beam search), or `undefined` at the end.
fn token_js(st: &State, out: crate::Result<crate::Progress>) -> Result<JsValue, JsValue> {
    match out.map_err(js_err)? {
        crate::Progress::Done => Ok(JsValue::UNDEFINED),
        crate::Progress::Working => Ok(JsValue::NULL),
        crate::Progress::Token(mut ev) => {
            let tok = &st.model.tokenizer;
            let top = std::mem::take(&mut ev.top);
            to_js(&TokenJs {
                top: (!top.is_empty()).then(|| {
                    top.iter()
                        .map(|c| TopJs {
                            id: c.id,
                            text: tok.decode(&[c.id]),
                            prob: c.prob,
                        })
                        .collect()
                }),
                event: ev,
            })
        }
    }
}

/// A loaded model and at most one generation in progress.
#[wasm_bindgen]
pub struct Engine {
    /// Taken out while a step runs, so overlapping calls get a clear error instead of a panic.
    state: Rc<RefCell<Option<State>>>,
    config: ConfigJs,
}

fn to_js<T: Serialize>(v: &T) -> Result<JsValue, JsValue> {
    v.serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| error(&e.to_string()))
}

/// The engine's state is out while a step runs: code `state`.
fn busy() -> JsValue {
    js_err(crate::Error::State(
        "the model is busy with another step; wait for it to finish".into(),
    ))
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
        Ok(Engine::new(model))
    }

    pub(crate) fn new(model: Model) -> Engine {
        let c = &model.config;
        let config = ConfigJs {
            n_layer: c.n_layer,
            n_head: c.n_head,
            n_embd: c.n_embd,
            n_positions: c.n_positions,
            vocab_size: c.vocab_size,
            n_params: c.n_params(),
            eos_token_id: c.eos_token_id,
        };
        Engine {
            state: Rc::new(RefCell::new(Some(State {
                model,
                generation: None,
                batch: Batch::new(),
                next: NextLogits::default(),
            }))),
            config,
        }
    }

    /// Bytes this model holds in wasm memory on the CPU, `{ weights, kvCache }` (allocated, as
    /// `budget::Footprint` predicts them); `undefined` on the GPU, whose weights are on the device.
    #[wasm_bindgen(getter, js_name = memoryUse)]
    pub fn memory_use(&self) -> Result<JsValue, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        let crate::Backend::Cpu(b) = &st.model.backend else {
            return Ok(JsValue::UNDEFINED);
        };
        let (weights, kv_cache) = b.allocated_bytes();
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Use {
            weights: usize,
            kv_cache: usize,
        }
        to_js(&Use { weights, kv_cache })
    }

    /// "webgpu" or "cpu": what actually runs (it changes to "cpu" if the GPU is lost).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> Result<String, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        Ok(st.model.backend.name().to_string())
    }

    /// The weight format on the CPU: "q8" or "f32" ("f32" on the GPU).
    #[wasm_bindgen(getter)]
    pub fn dtype(&self) -> Result<String, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        Ok(st.model.backend.dtype_name().to_string())
    }

    /// Why the model runs on the CPU when WebGPU was wanted or lost (`undefined` otherwise).
    #[wasm_bindgen(getter, js_name = gpuUnavailable)]
    pub fn gpu_unavailable(&self) -> Option<String> {
        self.state
            .borrow()
            .as_ref()
            .and_then(|st| st.model.gpu_unavailable.clone())
    }

    /// The model's multi-token prediction heads: `{ heads, draftVocab }`, or `undefined` when
    /// it has none (then `draft: 'mtp'` is refused).
    #[wasm_bindgen(getter, js_name = mtpHeads)]
    pub fn mtp_heads(&self) -> Result<JsValue, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        match &st.model.mtp {
            Some(h) => {
                to_js(&serde_json::json!({ "heads": h.len(), "draftVocab": h.draft_vocab() }))
            }
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// What `backend: 'auto'` measured when it raced a GPU against the CPU (`{ webgpuMs, cpuMs,
    /// logitDiff, chosen, why }`), or `undefined` when there was no race.
    #[wasm_bindgen(getter, js_name = backendTimes)]
    pub fn backend_times(&self) -> Result<JsValue, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        match &st.model.backend_times {
            Some(t) => to_js(t),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The GPU adapter in words (`undefined` on the CPU).
    #[wasm_bindgen(getter)]
    pub fn adapter(&self) -> Option<String> {
        let s = self.state.borrow();
        s.as_ref()
            .and_then(|st| st.model.backend.gpu_adapter().map(str::to_string))
    }

    /// Destroys the GPU device as a driver reset would (for testing the fallback to the CPU).
    #[wasm_bindgen(js_name = loseDevice)]
    pub fn lose_device(&self) {
        if let Some(st) = self.state.borrow().as_ref() {
            if let crate::Backend::WebGpu(g) = &st.model.backend {
                g.lose_device();
            }
        }
    }

    /// The model's shape: nLayer, nHead, nEmbd, nPositions, vocabSize, nParams, and eosTokenId.
    #[wasm_bindgen(getter)]
    pub fn config(&self) -> Result<JsValue, JsValue> {
        to_js(&self.config)
    }

    /// Token ids of `text`.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        st.model.tokenizer.encode(text).map_err(js_err)
    }

    /// Text of `ids`.
    pub fn decode(&self, ids: Vec<u32>) -> Result<String, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        Ok(st.model.tokenizer.decode(&ids))
    }

    /// Starts a generation (replacing any previous one) with options `parseOptions` checked.
    /// Not while a batch runs (`join`): both use the KV cache.
    pub fn start(&self, prompt: &str, params: &Params) -> Result<(), JsValue> {
        let params = params.params.clone();
        let mut s = self.state.borrow_mut();
        let st = s.as_mut().ok_or_else(busy)?;
        st.no_batch()?;
        st.model.backend.set_profiling(params.profile);
        st.generation = Some(Generation::new(&st.model, prompt, params).map_err(js_err)?);
        st.next.forget(); // the generation writes the KV cache from position 0
        Ok(())
    }

    /// The next-token logits after `ids`: resolves to `{ logits: Float32Array (vocabSize),
    /// reused }`, `reused` being how many of `ids` came from the KV cache (with `cache`, the
    /// longest common prefix with the last call's ids; without it none). Ends any generation.
    pub fn logits(&self, ids: Vec<u32>, cache: bool) -> js_sys::Promise {
        let cell = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            if let Err(e) = st.no_batch() {
                *cell.borrow_mut() = Some(st);
                return Err(e);
            }
            st.generation = None; // its KV cache is about to change under it
            let State { model, next, .. } = &mut st;
            let out = match next.logits(model, &ids, cache).await {
                Ok((logits, reused)) => {
                    let o = js_sys::Object::new();
                    let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&o, &k.into(), v);
                    let _ = set("logits", &js_sys::Float32Array::from(logits).into());
                    let _ = set("reused", &JsValue::from(reused as u32));
                    Ok(o.into())
                }
                Err(e) => Err(js_err(e)),
            };
            *cell.borrow_mut() = Some(st);
            out
        })
    }

    /// Runs one step; resolves to the token event, `null` after a model step that settled no
    /// token yet (beam search), or `undefined` when generation has ended.
    pub fn step(&self) -> js_sys::Promise {
        let cell = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            let out = st.step(None).await;
            let out = token_js(&st, out);
            *cell.borrow_mut() = Some(st);
            out
        })
    }

    /// `step` with `draft`'s model drafting (the generation's `draft: 'model'`); both engines
    /// are busy until it resolves.
    #[wasm_bindgen(js_name = stepWith)]
    pub fn step_with(&self, draft: &Engine) -> js_sys::Promise {
        let (cell, draft_cell) = (self.state.clone(), draft.state.clone());
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            let mut dst = match take(&draft_cell) {
                Ok(d) => d,
                Err(e) => {
                    *cell.borrow_mut() = Some(st);
                    return Err(e);
                }
            };
            let out = st.step(Some(&mut dst.model)).await;
            let out = token_js(&st, out);
            *cell.borrow_mut() = Some(st);
            *draft_cell.borrow_mut() = Some(dst);
            out
        })
    }

    /// Ends the generation before its next forward pass.
    pub fn cancel(&self) -> Result<(), JsValue> {
        let mut s = self.state.borrow_mut();
        let st = s.as_mut().ok_or_else(busy)?;
        if let Some(g) = st.generation.as_mut() {
            g.cancel();
        }
        Ok(())
    }

    /// The result of the current generation: text, tokens, stopReason, metrics.
    pub fn result(&self) -> Result<JsValue, JsValue> {
        let s = self.state.borrow();
        let st = s.as_ref().ok_or_else(busy)?;
        let g = st
            .generation
            .as_ref()
            .ok_or_else(|| js_err(crate::Error::State("no generation has run".into())))?;
        to_js(&ResultJs {
            result: g.result(),
            profile: st.model.backend.profile(),
        })
    }
}
