//! A loaded model: config, tokenizer and a backend, from a Hugging Face style folder or from
//! the same three files as bytes (the browser has no file system), and the one policy above the
//! backends: if the GPU fails mid-run (device lost, out of memory), the model continues on the
//! CPU from the weights it was loaded from and recomputes the sequence so far, so no token is
//! lost. The loop, the CLI and the browser all get it through `Model::forward`.

use crate::backend::cpu::{CpuBackend, CpuDtype};
use crate::backend::gpu::{GpuBackend, GpuOptions};
use crate::backend::{Backend, BackendChoice};
use crate::budget::Footprint;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;
use crate::weights::Gpt2Weights;

/// Where the weights can be had again for a fall-back to the CPU.
enum Reload {
    /// The bytes of `model.safetensors`, kept while on the GPU (the browser).
    Bytes(Vec<u8>),
    /// The file, read again when needed (native).
    #[cfg(not(target_arch = "wasm32"))]
    File(std::path::PathBuf),
}

/// Everything needed to generate text.
pub struct Model {
    pub config: Config,
    pub tokenizer: Tokenizer,
    pub backend: Backend,
    /// Why the model runs on the CPU when the GPU was wanted (`Auto` found no adapter, a software
    /// one, too small limits) or was lost.
    pub gpu_unavailable: Option<String>,
    /// The weight format of the CPU backend, now or after a fall-back (the GPU runs f32).
    pub cpu_dtype: CpuDtype,
    /// Set while on the GPU: where a CPU backend would get its weights.
    reload: Option<Reload>,
    /// How many times the backend was replaced (a fall-back): every KV cache is empty after.
    pub epoch: usize,
}

impl Model {
    /// Builds a model from the contents of `config.json`, `model.safetensors` and
    /// `tokenizer.json`; `cpu_dtype` is the weight format if (or once) it runs on the CPU. On the
    /// GPU the safetensors bytes are kept for a fall-back to the CPU; elsewhere they are dropped.
    pub async fn from_bytes(
        config_json: &[u8],
        safetensors: Vec<u8>,
        tokenizer_json: &[u8],
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Model> {
        let mut model =
            Self::build(config_json, &safetensors, tokenizer_json, choice, cpu_dtype).await?;
        if model.on_gpu() {
            model.reload = Some(Reload::Bytes(safetensors));
        }
        Ok(model)
    }

    async fn build(
        config_json: &[u8],
        safetensors: &[u8],
        tokenizer_json: &[u8],
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Model> {
        let config = Config::from_json(config_json)?;
        // Before anything is allocated: loading alone (the file, one tensor widened) must fit,
        // and the CPU backend must fit before it is built.
        let cpu = Footprint::cpu(&config, cpu_dtype, safetensors.len() as u64)?;
        let limit = crate::platform::memory_limit();
        Footprint {
            weights: 0,
            kv_cache: 0,
            activations: 0,
            ..cpu
        }
        .check(limit)?;
        let weights = Gpt2Weights::load(safetensors, &config)?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json)?;
        let cpu_backend = |weights: &Gpt2Weights| -> Result<Backend> {
            cpu.check(limit)?;
            Ok(Backend::Cpu(CpuBackend::new(&config, weights, cpu_dtype)?))
        };
        let mut gpu_unavailable = None;
        let backend = match choice {
            BackendChoice::Cpu => cpu_backend(&weights)?,
            BackendChoice::WebGpu => {
                let gpu = GpuBackend::new(&config, &weights, &GpuOptions::default()).await?;
                Backend::WebGpu(gpu)
            }
            BackendChoice::Auto => {
                let opts = GpuOptions {
                    hardware_only: true,
                    ..GpuOptions::default()
                };
                match GpuBackend::new(&config, &weights, &opts).await {
                    Ok(gpu) => Backend::WebGpu(gpu),
                    Err(e) => {
                        gpu_unavailable = Some(e.to_string());
                        cpu_backend(&weights)?
                    }
                }
            }
        };
        Ok(Model {
            config,
            tokenizer,
            backend,
            gpu_unavailable,
            cpu_dtype,
            reload: None,
            epoch: 0,
        })
    }

    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from a folder. On the GPU,
    /// a fall-back to the CPU reads the weights file again.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir(
        dir: &std::path::Path,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Model> {
        let (c, w, t) = (
            read(&dir.join("config.json"))?,
            read(&dir.join("model.safetensors"))?,
            read(&dir.join("tokenizer.json"))?,
        );
        let mut model = pollster::block_on(Self::build(&c, &w, &t, choice, cpu_dtype))?;
        if model.on_gpu() {
            model.reload = Some(Reload::File(dir.join("model.safetensors")));
        }
        Ok(model)
    }

    fn on_gpu(&self) -> bool {
        matches!(self.backend, Backend::WebGpu(_))
    }

    /// Logits of the last of `seq`, whose first `cached` ids the backend already holds in its KV
    /// cache (from earlier calls): the others run at positions `cached..`. If the GPU fails, the
    /// model falls back to the CPU (`gpu_unavailable` says why) and runs the whole of `seq`.
    pub async fn forward(&mut self, seq: &[u32], cached: usize) -> Result<&[f32]> {
        let new = seq.get(cached..).unwrap_or_default();
        let ran = self.backend.forward(new, cached).await.map(drop);
        if self.recover(ran)? {
            return self.backend.forward(seq, 0).await;
        }
        Ok(&self.backend.logits()[..self.config.vocab_size])
    }

    /// The verification pass of speculative decoding over `seq[cached..]`, the others held in
    /// the KV cache already: the logits of the first `head` new ids, row after row (`head_rows`
    /// gives more), with the same fall-back as `forward` (after which everything before the new
    /// ids is recomputed on the CPU first).
    pub async fn forward_all(&mut self, seq: &[u32], cached: usize, head: usize) -> Result<&[f32]> {
        let new = seq.get(cached..).unwrap_or_default();
        let v = self.config.vocab_size;
        let head = head.min(new.len());
        let ran = self.backend.forward_all(new, cached, head).await.map(drop);
        if self.recover(ran)? {
            // Everything before the new ids once, then the new ids as one verification pass.
            if cached > 0 {
                self.backend.forward(&seq[..cached], 0).await?;
            }
            return self.backend.forward_all(new, cached, head).await;
        }
        Ok(&self.backend.logits()[..head * v])
    }

    /// The fall-back policy, once for every kind of forward: a GPU failure, when the weights
    /// can be had again, moves the model to the CPU (`Ok(true)`: run it again there); other
    /// errors pass through; success is `Ok(false)`.
    fn recover(&mut self, ran: Result<()>) -> Result<bool> {
        match ran {
            Err(Error::Gpu(why)) if self.reload.is_some() => {
                self.fall_back_to_cpu(format!("the GPU failed ({why}); continuing on the CPU"))?;
                Ok(true)
            }
            Err(e) => Err(e),
            Ok(()) => Ok(false),
        }
    }

    /// `Backend::kv_slots` with the fall-back: after one (`epoch` changes) the CPU backend has
    /// one empty slot, and the caller makes its slots again and recomputes its sequences.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        let ran = self.backend.kv_slots(n).await;
        self.recover(ran).map(drop)
    }

    /// `Backend::kv_use` with the fall-back (see `kv_slots`).
    pub async fn kv_use(&mut self, slot: usize, len: usize) -> Result<()> {
        let ran = self.backend.kv_use(slot, len).await;
        self.recover(ran).map(drop)
    }

    /// `Backend::kv_copy` with the fall-back (see `kv_slots`).
    pub async fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        let ran = self.backend.kv_copy(from, to, len).await;
        self.recover(ran).map(drop)
    }

    /// The logits of rows `from..to` of the last verification pass (`forward_all`).
    pub fn head_rows(&mut self, from: usize, to: usize) -> Result<&[f32]> {
        self.backend.head_rows(from, to)
    }

    /// Replaces the backend with the CPU one, built from the weights the model was loaded from,
    /// keeping `why` in `gpu_unavailable`. The new KV cache is empty.
    pub fn fall_back_to_cpu(&mut self, why: String) -> Result<()> {
        let bytes = match self.reload.take() {
            Some(Reload::Bytes(b)) => b,
            #[cfg(not(target_arch = "wasm32"))]
            Some(Reload::File(path)) => read(&path)?,
            None => {
                return Err(Error::Backend(format!(
                    "{why}, but there are no weights to rebuild the model on the CPU from"
                )))
            }
        };
        Footprint::cpu(&self.config, self.cpu_dtype, bytes.len() as u64)?
            .check(crate::platform::memory_limit())?;
        let weights = Gpt2Weights::load(&bytes, &self.config)?;
        self.backend = Backend::Cpu(CpuBackend::new(&self.config, &weights, self.cpu_dtype)?);
        self.gpu_unavailable = Some(why);
        self.epoch += 1;
        Ok(())
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}
