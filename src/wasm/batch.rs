//! The engine's batch (`generate::Batch`) for the worker: concurrent requests of the page join
//! it (`join`), step together (`stepBatch`) and leave with their results (`leave`).

use super::{busy, js_err, take, to_js, token_js, Engine, Params, ResultJs};
use crate::generate::Generation;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
impl Engine {
    /// Adds a generation to the batch (options `parseOptions` checked and `batchable`): it
    /// shares forward passes with the others from the next `stepBatch` on. Returns its slot, its
    /// name in `stepBatch`'s answers. Ends a single generation (`start`).
    pub fn join(&self, prompt: &str, params: &Params) -> js_sys::Promise {
        let (cell, prompt, params) = (
            self.state.clone(),
            prompt.to_string(),
            params.params.clone(),
        );
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            let out = async {
                st.generation = None;
                st.next.forget(); // the batch writes the KV cache slots
                st.model.backend.set_profiling(false);
                let g = Generation::new(&st.model, &prompt, params)?;
                st.batch.add(&mut st.model, g).await
            }
            .await;
            *cell.borrow_mut() = Some(st);
            out.map(|slot| JsValue::from(slot as u32)).map_err(js_err)
        })
    }

    /// One step of every generation of the batch: resolves to `[{ slot, token, done }]`,
    /// `token` being the token event (or `null`), `done` true for a member that ended (its
    /// result is `leave(slot)`'s).
    #[wasm_bindgen(js_name = stepBatch)]
    pub fn step_batch(&self) -> js_sys::Promise {
        let cell = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            let out = match st.batch.step(&mut st.model).await {
                Ok(moves) => {
                    let list = js_sys::Array::new();
                    for (slot, p) in moves {
                        let done = matches!(p, crate::Progress::Done);
                        let token = if done {
                            JsValue::NULL
                        } else {
                            token_js(&st, Ok(p))?
                        };
                        let o = js_sys::Object::new();
                        let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&o, &k.into(), v);
                        let _ = set("slot", &JsValue::from(slot as u32));
                        let _ = set("token", &token);
                        let _ = set("done", &JsValue::from(done));
                        list.push(&o);
                    }
                    Ok(list.into())
                }
                Err(e) => Err(js_err(e)),
            };
            *cell.borrow_mut() = Some(st);
            out
        })
    }

    /// Ends the batch's generation in `slot` before its next forward pass.
    #[wasm_bindgen(js_name = cancelIn)]
    pub fn cancel_in(&self, slot: u32) -> Result<(), JsValue> {
        let mut s = self.state.borrow_mut();
        let st = s.as_mut().ok_or_else(busy)?;
        if let Some(g) = st.batch.get_mut(slot as usize) {
            g.cancel();
        }
        Ok(())
    }

    /// Takes the generation in `slot` out of the batch: its result (text, tokens, stopReason,
    /// metrics). When the batch is empty, its KV cache slots but the first are freed.
    pub fn leave(&self, slot: u32) -> js_sys::Promise {
        let cell = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut st = take(&cell)?;
            let out = async {
                let g = st.batch.remove(slot as usize).ok_or_else(|| {
                    crate::Error::State(format!("no generation in batch slot {slot}"))
                })?;
                st.batch.shrink(&mut st.model).await?;
                Ok(g.result())
            }
            .await;
            let out = out.map_err(js_err).and_then(|result| {
                to_js(&ResultJs {
                    result,
                    profile: None,
                })
            });
            *cell.borrow_mut() = Some(st);
            out
        })
    }

    /// How many generations the batch holds.
    #[wasm_bindgen(getter)]
    pub fn batched(&self) -> Result<u32, JsValue> {
        let s = self.state.borrow();
        Ok(s.as_ref().ok_or_else(busy)?.batch.len() as u32)
    }
}
