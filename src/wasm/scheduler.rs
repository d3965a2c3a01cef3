//! The worker's one scheduler (`crate::scheduler` over the models it owns): the worker hands each
//! loaded model to it (`add`), submits every request (`submit`, `submitLogits`), passes aborts
//! on, and pumps `step` between messages, posting each event as it comes: `{ id, type: 'token',
//! token }`, `{ id, type: 'done', value }`, `{ id, type: 'error', message, code }`, `{ id, type:
//! 'backend', backend, reason }` (the worker protocol's replies, as they are).
//!
//! A step's one asynchronous part (a GPU readback) leaves the scheduler free: a request, an abort
//! or a dispose that arrives meanwhile is taken at once (for the model in that step, carried out
//! when the step ends). `inFlight` names the model of the step under way, so that a trap inside
//! it fails that model only (`failModel`).

use super::{error, js_err, sentence, to_js, ConfigJs, Engine};
use crate::scheduler::{Event, Job, ModelId, Output, Prompt, RequestId};
use crate::Model;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;

type Inner = crate::scheduler::Scheduler<Model>;

/// Every model of the worker and every request on them.
#[wasm_bindgen]
pub struct Scheduler {
    inner: Rc<RefCell<Inner>>,
    in_flight: Rc<Cell<Option<ModelId>>>,
    /// Tests only (`trapNextStep`): the model one of whose steps fails as a trap would, and how
    /// many of its steps run before that one.
    trap: Cell<Option<(ModelId, u32)>>,
}

/// A JS request id (a whole number the page chose) as the scheduler's.
fn request_id(id: f64) -> Result<RequestId, JsValue> {
    if id.fract() == 0.0 && (0.0..=crate::generate::options::MAX_SAFE_INTEGER).contains(&id) {
        return Ok(id as RequestId);
    }
    Err(error(&format!("request id {id} is not a whole number")))
}

#[derive(Serialize)]
struct TopJs {
    id: u32,
    text: String,
    prob: f32,
}

/// A token event, its candidates with their text, and its choice with `n` > 1.
#[derive(Serialize)]
struct TokenJs {
    #[serde(flatten)]
    event: crate::TokenEvent,
    #[serde(skip_serializing_if = "Option::is_none")]
    top: Option<Vec<TopJs>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    choice: Option<usize>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorJs {
    id: RequestId,
    r#type: &'static str,
    message: String,
    code: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Reply<T: Serialize> {
    id: RequestId,
    r#type: &'static str,
    #[serde(flatten)]
    body: T,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler {
            inner: Rc::new(RefCell::new(Inner::new())),
            in_flight: Rc::new(Cell::new(None)),
            trap: Cell::new(None),
        }
    }
}

impl Scheduler {
    fn with<T>(&self, model: u32, f: impl FnOnce(&Model) -> T) -> Result<T, JsValue> {
        let s = self.inner.borrow();
        s.model(model as ModelId).map(f).map_err(js_err)
    }
}

#[wasm_bindgen]
impl Scheduler {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Scheduler {
        Scheduler::default()
    }

    /// Takes a loaded model (the `Engine` is used up); its id names it in the other calls.
    pub fn add(&self, engine: Engine) -> u32 {
        self.inner.borrow_mut().add_model(engine.model) as u32
    }

    /// Queues a generation of `prompt` with generate `options` (the JS API's names, checked now:
    /// an error names the option), `draft` the id of the model that drafts for `draft: 'model'`.
    /// Throws with code `busy` when the model's queue is full.
    pub fn submit(
        &self,
        id: f64,
        model: u32,
        prompt: String,
        options: JsValue,
        draft: Option<u32>,
    ) -> Result<(), JsValue> {
        let params = super::options::params_of(&options)?;
        let job = Job::Generate {
            prompt: Prompt::Text(prompt),
            params,
            draft: draft.map(|d| d as ModelId),
        };
        let mut s = self.inner.borrow_mut();
        s.submit(request_id(id)?, model as ModelId, job)
            .map_err(js_err)
    }

    /// Queues a `logits` call: the next-token logits after `ids`, the KV cache reused from the
    /// last such call with `cache`.
    #[wasm_bindgen(js_name = submitLogits)]
    pub fn submit_logits(
        &self,
        id: f64,
        model: u32,
        ids: Vec<u32>,
        cache: bool,
    ) -> Result<(), JsValue> {
        let job = Job::Logits { ids, cache };
        let mut s = self.inner.borrow_mut();
        s.submit(request_id(id)?, model as ModelId, job)
            .map_err(js_err)
    }

    /// Ends request `id`: queued, it is answered by the next step; running, it ends before its
    /// next forward pass.
    pub fn abort(&self, id: f64) {
        if let Ok(id) = request_id(id) {
            self.inner.borrow_mut().abort(id);
        }
    }

    /// Whether `step` has anything to do.
    #[wasm_bindgen(getter, js_name = hasWork)]
    pub fn has_work(&self) -> bool {
        self.inner.borrow().has_work()
    }

    /// The model of the step under way, if one is.
    #[wasm_bindgen(getter, js_name = inFlight)]
    pub fn in_flight(&self) -> Option<u32> {
        self.in_flight.get().map(|m| m as u32)
    }

    /// One model step (models take turns): resolves to the events of it and of the calls since
    /// the last step, each the worker's reply as it is posted to the page.
    pub fn step(&self) -> js_sys::Promise {
        let inner = self.inner.clone();
        let turn = inner.borrow_mut().begin();
        let model = turn.as_ref().map(|t| t.model());
        self.in_flight.set(model);
        let trapped = match self.trap.get() {
            Some((t, 0)) => model == Some(t),
            Some((t, left)) => {
                if model == Some(t) {
                    self.trap.set(Some((t, left - 1)));
                }
                false
            }
            None => false,
        };
        if trapped {
            // The turn is lost, as a trap inside it would lose it.
            self.trap.set(None);
            drop(turn);
            let e = js_sys::WebAssembly::RuntimeError::new("unreachable executed (a test)");
            return js_sys::Promise::reject(&e);
        }
        let in_flight = self.in_flight.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            if let Some(turn) = turn {
                let turn = turn.run().await;
                inner.borrow_mut().finish(turn);
            }
            in_flight.set(None);
            let events = inner.borrow_mut().take_events();
            let s = inner.borrow();
            let list = js_sys::Array::new();
            for ev in events {
                list.push(&event_js(&s, model, ev)?);
            }
            Ok(list.into())
        })
    }

    /// Model `model` stopped working inside a step (a trap): every request on it fails with
    /// `message` (code `crash`), answered by the next step, and the model is gone.
    #[wasm_bindgen(js_name = failModel)]
    pub fn fail_model(&self, model: u32, message: String) {
        self.in_flight.set(None);
        let e = crate::Error::Crash(message);
        self.inner.borrow_mut().fail_model(model as ModelId, &e);
    }

    /// Removes model `model` and frees it (after the step under way, if it is in it); its
    /// requests end with a sentence, answered by the next step.
    pub fn dispose(&self, model: u32) -> Result<(), JsValue> {
        let gone = self.inner.borrow_mut().dispose(model as ModelId);
        gone.map(drop).map_err(js_err)
    }

    /// The ids of the requests in flight on `model` (whom a fall-back's progress concerns).
    #[wasm_bindgen(js_name = requestsOn)]
    pub fn requests_on(&self, model: u32) -> Vec<f64> {
        let s = self.inner.borrow();
        (s.requests_on(model as ModelId).into_iter())
            .map(|id| id as f64)
            .collect()
    }

    /// Tests only: the step of `model` after `after` more of its steps (0: its next) fails as a
    /// trap inside it would (the worker's testing.js `trap`).
    #[wasm_bindgen(js_name = trapNextStep)]
    pub fn trap_next_step(&self, model: u32, after: u32) {
        self.trap.set(Some((model as ModelId, after)));
    }

    /// What runs `model` and what it is: `{ backend, dtype, config, adapter, gpuKernel,
    /// gpuUnavailable, mtpHeads, backendTimes }` (`backend` "webgpu" or "cpu", changing to "cpu"
    /// if the GPU is lost; `dtype` the weight format in use; `adapter` the GPU in words;
    /// `gpuKernel` how the GPU's q8 kernels take their products ("dot4I8Packed" or "bytes",
    /// `GpuBackend::q8_kernel`); `gpuUnavailable` why
    /// the CPU runs it when WebGPU was wanted or lost; `mtpHeads` `{ heads, draftVocab }`;
    /// `backendTimes` what `auto` measured; each undefined when it does not apply).
    pub fn info(&self, model: u32) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Info<'a> {
            backend: &'static str,
            dtype: &'static str,
            config: ConfigJs,
            #[serde(skip_serializing_if = "Option::is_none")]
            adapter: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            gpu_kernel: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            gpu_unavailable: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            mtp_heads: Option<serde_json::Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            backend_times: Option<&'a crate::model::BackendTimes>,
        }
        let s = self.inner.borrow();
        let m = s.model(model as ModelId).map_err(js_err)?;
        to_js(&Info {
            backend: m.backend().name(),
            dtype: m.backend().dtype_name(),
            config: ConfigJs::of(&m.config),
            adapter: m.backend().gpu_adapter(),
            gpu_kernel: m.backend().gpu_q8_kernel(),
            gpu_unavailable: m.gpu_unavailable.as_deref(),
            mtp_heads: (m.mtp.as_ref())
                .map(|h| serde_json::json!({ "heads": h.len(), "draftVocab": h.draft_vocab() })),
            backend_times: m.backend_times.as_ref(),
        })
    }

    /// Gives `model` the verdict on its multi-token heads that an earlier visit measured in this
    /// browser (`metrics.mtp.verdict`, as JSON; gpt2.js keeps it per build, threads, backend and
    /// dtype), so that `draft: 'mtp'` does not measure again (`mtp::HeadsTrial::remember`).
    #[wasm_bindgen(js_name = rememberHeadsVerdict)]
    pub fn remember_heads_verdict(&self, model: u32, json: &str) -> Result<(), JsValue> {
        let mut s = self.inner.borrow_mut();
        let m = s.model_mut(model as ModelId).map_err(js_err)?;
        m.heads_trial.remember(json).map_err(js_err)
    }

    /// Bytes `model` holds, `{ weights, kvCache, on }`: in wasm memory on the CPU (allocated, as
    /// `budget::Footprint` predicts them), in the device's buffers on WebGPU (`on` says which:
    /// "cpu" or "webgpu"), in the dtype it runs.
    #[wasm_bindgen(js_name = memoryUse)]
    pub fn memory_use(&self, model: u32) -> Result<JsValue, JsValue> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Use {
            weights: u64,
            kv_cache: u64,
            on: &'static str,
        }
        let (weights, kv_cache, on) = self.with(model, |m| {
            let (w, kv) = m.backend().memory();
            (w, kv, m.backend().name())
        })?;
        to_js(&Use {
            weights,
            kv_cache,
            on,
        })
    }

    /// Token ids of `text` by `model`'s tokenizer.
    pub fn tokenize(&self, model: u32, text: &str) -> Result<Vec<u32>, JsValue> {
        self.with(model, |m| m.tokenizer.encode(text))?
            .map_err(js_err)
    }

    /// Text of `ids` by `model`'s tokenizer.
    pub fn decode(&self, model: u32, ids: Vec<u32>) -> Result<String, JsValue> {
        self.with(model, |m| m.tokenizer.decode(&ids))
    }

    /// Destroys `model`'s GPU device as a driver reset would (for testing the fall-back to the
    /// CPU); false when it is not on the GPU.
    #[wasm_bindgen(js_name = loseDevice)]
    pub fn lose_device(&self, model: u32) -> Result<bool, JsValue> {
        self.with(model, |m| match &m.backend() {
            crate::Backend::WebGpu(g) => {
                g.lose_device();
                true
            }
            crate::Backend::Cpu(_) => false,
        })
    }
}

/// An event as the worker posts it. `model`: the model of the step, whose tokenizer gives the
/// token events' candidates their text (every token of a step is of its model).
fn event_js(s: &Inner, model: Option<ModelId>, ev: Event) -> Result<JsValue, JsValue> {
    match ev {
        Event::Token {
            id,
            choice,
            mut event,
        } => {
            let top = std::mem::take(&mut event.top);
            let tok = model.and_then(|m| s.model(m).ok()).map(|m| &m.tokenizer);
            let top = (!top.is_empty()).then(|| {
                (top.iter())
                    .map(|c| TopJs {
                        id: c.id,
                        text: tok.map(|t| t.decode(&[c.id])).unwrap_or_default(),
                        prob: c.prob,
                    })
                    .collect()
            });
            let token = TokenJs { event, top, choice };
            #[derive(Serialize)]
            struct Body {
                token: TokenJs,
            }
            to_js(&Reply {
                id,
                r#type: "token",
                body: Body { token },
            })
        }
        Event::Done { id, output } => {
            let value = match output {
                Output::Completion(c) => to_js(&*c)?,
                Output::Logits(Some(l)) => {
                    let o = js_sys::Object::new();
                    let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&o, &k.into(), v);
                    set("logits", &js_sys::Float32Array::from(&l.logits[..]).into())?;
                    set("reused", &JsValue::from(l.reused as u32))?;
                    set("ms", &JsValue::from(l.ms))?;
                    o.into()
                }
                Output::Logits(None) => JsValue::NULL,
            };
            let o = js_sys::Object::new();
            let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&o, &k.into(), v);
            set("id", &JsValue::from(id as f64))?;
            set("type", &"done".into())?;
            set("value", &value)?;
            Ok(o.into())
        }
        Event::Failed { id, error } => to_js(&ErrorJs {
            id,
            r#type: "error",
            message: sentence(&error),
            code: error.code(),
        }),
        Event::Backend {
            id,
            backend,
            reason,
        } => {
            #[derive(Serialize)]
            struct Body {
                backend: &'static str,
                reason: Option<String>,
            }
            to_js(&Reply {
                id,
                r#type: "backend",
                body: Body { backend, reason },
            })
        }
    }
}
