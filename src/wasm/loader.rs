//! Loading in the browser: what the worker reads before the weights (a GGUF file's header, a
//! folder's vocabulary, the memory a config needs), then `model.safetensors` streamed into an
//! `EngineLoader` chunk by chunk; a fall-back from a lost GPU reads the weights again through
//! `JsSource`.

use super::{js_err, to_js, Engine};
use crate::backend::{cpu::CpuDtype, BackendChoice};
use crate::weights::gguf::is_gguf;
use crate::weights::stream::Piece;
use serde::Serialize;
use wasm_bindgen::prelude::*;

/// `tokenizer.json` made from a folder's `vocab.json` and `merges.txt` (where it has no
/// tokenizer.json), or the sentence that says what is wrong with them.
#[wasm_bindgen(js_name = tokenizerFromVocab)]
pub fn tokenizer_from_vocab(vocab: &[u8], merges: &[u8]) -> Result<Vec<u8>, JsValue> {
    crate::tokenizer::json_from_vocab_merges(vocab, merges).map_err(js_err)
}

/// A GGUF file's `config.json`, made from its header (a GGUF file alone is a model), and the
/// header's bytes, which EngineLoader.start takes for the tokenizer (built from the lists there):
/// `[config, header]` once `bytes`, the file's start, hold the header, else
/// the number of bytes it needs at least. Throws the sentence for a file that is not GGUF, not
/// GPT-2, or broken, naming `file` (`model.gguf` when not given).
#[wasm_bindgen(js_name = ggufHead)]
pub fn gguf_head(bytes: &[u8], file: Option<String>) -> Result<JsValue, JsValue> {
    use crate::weights::gguf::{Gguf, Parsed};
    let file = file.as_deref().unwrap_or("model.gguf");
    match Gguf::parse(file, bytes).map_err(js_err)? {
        Parsed::Need(n) => Ok(JsValue::from_f64(n as f64)),
        Parsed::Header(g) => {
            let out = js_sys::Array::new();
            out.push(&js_sys::Uint8Array::from(
                &g.config_json().map_err(js_err)?[..],
            ));
            // The header's bytes stand for the tokenizer, built here from the lists (a file
            // without GPT-2's tokenizer fails here) and kept for EngineLoader.start, which gets
            // those bytes back and so does not parse the header again.
            let tokenizer = g.tokenizer().map_err(js_err)?;
            let end = (g.data_start as usize).min(bytes.len());
            keep_tokenizer(&bytes[..end], tokenizer);
            out.push(&js_sys::Uint8Array::from(&bytes[..end]));
            Ok(out.into())
        }
    }
}

/// What a model of this `config.json` will need in memory on the CPU at `dtype` when its weights
/// stream in, checked against what this build can address before anything is downloaded or
/// allocated: `{ file, weights, kvCache, activations, conversion, peak, limit }` in bytes (`file`:
/// the most bytes of the weights file held at once, one tensor), or an error sentence that names
/// the model's size and the limit. `platform_bytes` and `platform_limit` lower the limit where the
/// platform stops a tab sooner than the build's address space would (iOS and iPadOS close a page
/// at about 1.5 GB): the page knows its platform, the engine does not.
#[wasm_bindgen(js_name = checkMemory)]
pub fn check_memory(
    config: &[u8],
    dtype: String,
    platform_bytes: Option<f64>,
    platform_limit: Option<String>,
) -> Result<JsValue, JsValue> {
    let dtype = if dtype == "f16" { "q8".into() } else { dtype }; // f16 is the GPU's
    #[derive(Serialize)]
    struct Plan {
        #[serde(flatten)]
        footprint: crate::budget::Footprint,
        peak: u64,
        limit: Option<u64>,
    }
    let config = crate::Config::from_json(config).map_err(js_err)?;
    let dtype: CpuDtype = dtype.parse().map_err(js_err)?;
    let footprint = crate::budget::Footprint::streamed_cpu(&config, dtype).map_err(js_err)?;
    let build = crate::platform::memory_limit();
    let limit = match (platform_bytes, platform_limit.as_deref()) {
        (Some(bytes), Some(what))
            if bytes.is_finite()
                && bytes >= 1.0
                && build.is_none_or(|(b, _)| (bytes as u64) < b) =>
        {
            Some((bytes as u64, what))
        }
        _ => build,
    };
    footprint.check(limit).map_err(js_err)?;
    to_js(&Plan {
        footprint,
        peak: footprint.peak(),
        limit: limit.map(|(bytes, _)| bytes),
    })
}

/// A model whose `model.safetensors` is arriving: the worker pushes each chunk of its download
/// (or of a chosen file) as it comes, and each tensor is converted (or uploaded to the GPU) at
/// once, so the file is never whole in wasm memory.
#[wasm_bindgen]
pub struct EngineLoader {
    loader: crate::model::Loader,
}

#[wasm_bindgen]
impl EngineLoader {
    /// Checks `config.json`, `tokenizer.json` and the memory the model needs, and opens the GPU
    /// for "webgpu" (or "auto" when a hardware adapter fits), before any weight is read. `file`
    /// is the weights file's name, which its errors give (when not given: `model.gguf` if
    /// `tokenizer` is a GGUF file's header, else `model.safetensors`; shards are named by their
    /// index, `sharded`).
    pub async fn start(
        config: Vec<u8>,
        tokenizer: Vec<u8>,
        backend: String,
        dtype: String,
        file: Option<String>,
    ) -> Result<EngineLoader, JsValue> {
        let choice: BackendChoice = backend.parse().map_err(js_err)?;
        // "f16": f16 weight matrices on WebGPU, q8 on the CPU (it has no f16 arithmetic).
        let (dtype, f16) = match dtype.as_str() {
            "f16" => (CpuDtype::Q8, true),
            other => (other.parse().map_err(js_err)?, false),
        };
        let unnamed = if is_gguf(&tokenizer) {
            "model.gguf"
        } else {
            "model.safetensors"
        };
        let file = file.as_deref().unwrap_or(unnamed);
        let loader = match kept_tokenizer(&tokenizer) {
            Some(t) => {
                crate::model::Loader::with_tokenizer(&config, t, file, choice, dtype, f16).await
            }
            None => {
                crate::model::Loader::with_gpu_f16(&config, &tokenizer, file, choice, dtype, f16)
                    .await
            }
        };
        Ok(EngineLoader {
            loader: loader.map_err(js_err)?,
        })
    }

    /// Reads the weights from the shards `model.safetensors.index.json` (its bytes) names, in
    /// the order returned, `nextFile()` between them; before any `push`.
    pub fn sharded(&mut self, index: &[u8]) -> Result<Vec<String>, JsValue> {
        self.loader.sharded(index).map_err(js_err)
    }

    /// Ends a shard (every tensor it should hold came) and starts the next.
    #[wasm_bindgen(js_name = nextFile)]
    pub fn next_file(&mut self) -> Result<(), JsValue> {
        self.loader.next_file().map_err(js_err)
    }

    /// The next bytes of the weights file.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        self.loader.push(chunk).map_err(js_err)
    }

    /// Bytes of the weights read so far.
    #[wasm_bindgen(getter)]
    pub fn loaded(&self) -> f64 {
        self.loader.progress().0 as f64
    }

    /// The weights file's length from its header (undefined until the header has come).
    #[wasm_bindgen(getter)]
    pub fn total(&self) -> Option<f64> {
        self.loader.progress().1.map(|n| n as f64)
    }

    /// The tensor whose bytes come next (undefined before the header and after the last).
    #[wasm_bindgen(getter)]
    pub fn tensor(&self) -> Option<String> {
        self.loader.progress().2.map(str::to_string)
    }

    /// Whether the weights go to the GPU.
    #[wasm_bindgen(getter, js_name = onGpu)]
    pub fn on_gpu(&self) -> bool {
        self.loader.on_gpu()
    }

    /// The engine, once the whole file was pushed. `reopen(i)` must return a promise of a fresh
    /// reader of weights file `i` (0, or the shards in order; its `read()` as a ReadableStream
    /// reader's), or of null past the last: a fall-back from the GPU to the CPU reads the files
    /// again through it instead of keeping them.
    pub async fn finish(self, reopen: Option<js_sys::Function>) -> Result<Engine, JsValue> {
        let reload = reopen.map(|f| {
            crate::model::Reload::Source(Box::new(JsSource {
                reopen: f,
                reader: None,
                file: 0,
            }))
        });
        let model = self.loader.finish(reload).await.map_err(js_err)?;
        Ok(Engine::new(model))
    }
}

/// The weights files read again through JS readers (`EngineLoader::finish`'s `reopen`).
struct JsSource {
    reopen: js_sys::Function,
    reader: Option<JsValue>,
    /// The file being read.
    file: u32,
}

impl JsSource {
    async fn next(&mut self) -> crate::Result<Piece> {
        let reader = match self.reader.take() {
            Some(r) => r,
            None => match self.open().await? {
                Some(r) => r,
                None => return Ok(Piece::End),
            },
        };
        let read = js_sys::Reflect::get(&reader, &"read".into())
            .ok()
            .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
            .ok_or_else(|| crate::Error::param("reopen", "it did not give a reader"))?;
        let p = read.call0(&reader).map_err(|e| fail("broke off", e))?;
        let step = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&p))
            .await
            .map_err(|e| fail("broke off", e))?;
        let done = js_sys::Reflect::get(&step, &"done".into()).map_err(|e| fail("broke off", e))?;
        if done.is_truthy() {
            // The next file, when `reopen` gives one.
            self.file += 1;
            return Ok(match self.open().await? {
                Some(r) => {
                    self.reader = Some(r);
                    Piece::NextFile
                }
                None => Piece::End,
            });
        }
        let value =
            js_sys::Reflect::get(&step, &"value".into()).map_err(|e| fail("broke off", e))?;
        self.reader = Some(reader);
        Ok(Piece::Bytes(js_sys::Uint8Array::new(&value).to_vec()))
    }

    /// A reader of file `self.file`, or `None` past the last (and the next reading starts over).
    async fn open(&mut self) -> crate::Result<Option<JsValue>> {
        let p = (self.reopen)
            .call1(&JsValue::NULL, &self.file.into())
            .map_err(|e| fail("failed", e))?;
        let r = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&p))
            .await
            .map_err(|e| fail("failed", e))?;
        if r.is_null() || r.is_undefined() {
            self.file = 0;
            return Ok(None);
        }
        Ok(Some(r))
    }
}

fn fail(what: &str, e: JsValue) -> crate::Error {
    let msg = e
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .unwrap_or_else(|| format!("{e:?}"));
    crate::Error::Backend(format!("reading the weights again {what}: {msg}"))
}

impl crate::weights::stream::Source for JsSource {
    fn next_chunk(&mut self) -> crate::weights::stream::NextChunk<'_> {
        Box::pin(self.next())
    }
}

/// Bytes of this engine's wasm memory: it only grows, so after a load it is the load's peak.
#[wasm_bindgen(js_name = memoryBytes)]
pub fn memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .unchecked_into::<js_sys::WebAssembly::Memory>()
        .buffer()
        .unchecked_into::<js_sys::ArrayBuffer>()
        .byte_length() as f64
}

thread_local! {
    /// The tokenizer `ggufHead` built from a GGUF header, with the header's length and hash: the
    /// load that parsed it hands the same bytes to `EngineLoader.start` next.
    static KEPT: std::cell::RefCell<Option<(usize, u64, crate::tokenizer::Tokenizer)>> =
        const { std::cell::RefCell::new(None) };
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Keeps the tokenizer built from the GGUF header `header` (replacing any kept before).
fn keep_tokenizer(header: &[u8], tokenizer: crate::tokenizer::Tokenizer) {
    let kept = (header.len(), digest(header), tokenizer);
    KEPT.with(|k| *k.borrow_mut() = Some(kept));
}

/// The tokenizer kept for exactly these header bytes, taken out; None for any other bytes.
fn kept_tokenizer(header: &[u8]) -> Option<crate::tokenizer::Tokenizer> {
    let (len, hash, tokenizer) = KEPT.with(|k| k.borrow_mut().take())?;
    (len == header.len() && hash == digest(header)).then_some(tokenizer)
}
