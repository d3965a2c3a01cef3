//! A loaded model: config, tokenizer and a backend, from a Hugging Face style folder or from
//! the same three files as bytes (the browser has no file system).

use crate::backend::cpu::{CpuBackend, CpuDtype};
use crate::backend::gpu::{GpuBackend, GpuOptions};
use crate::backend::{Backend, BackendChoice};
use crate::budget::Footprint;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;
use crate::weights::Gpt2Weights;
use std::path::Path;

/// Everything needed to generate text.
pub struct Model {
    pub config: Config,
    pub tokenizer: Tokenizer,
    pub backend: Backend,
    /// Why `Auto` runs on the CPU when it does (no adapter, a software one, too small limits).
    pub gpu_unavailable: Option<String>,
    /// The weight format of the CPU backend, now or after a fall-back (the GPU runs f32).
    pub cpu_dtype: CpuDtype,
}

impl Model {
    /// Builds a model from the contents of `config.json`, `model.safetensors` and `tokenizer.json`;
    /// `cpu_dtype` is the weight format if (or once) it runs on the CPU.
    pub async fn from_bytes(
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
            BackendChoice::Gpu => {
                let gpu = GpuBackend::new(&config, &weights, &GpuOptions::default()).await?;
                Backend::Gpu(gpu)
            }
            BackendChoice::Auto => {
                let opts = GpuOptions {
                    hardware_only: true,
                    ..GpuOptions::default()
                };
                match GpuBackend::new(&config, &weights, &opts).await {
                    Ok(gpu) => Backend::Gpu(gpu),
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
        })
    }

    /// Checks that prompt ids fit the context and the vocabulary.
    pub fn check_prompt(&self, ids: &[u32]) -> Result<()> {
        let config = &self.config;
        if ids.len() > config.n_positions {
            return Err(Error::PromptTooLong {
                tokens: ids.len(),
                n_ctx: config.n_positions,
            });
        }
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= config.vocab_size) {
            return Err(Error::Tokenizer(format!(
                "the prompt has token id {bad}, outside the model's vocabulary of {} ids",
                config.vocab_size
            )));
        }
        Ok(())
    }

    /// Replaces the backend with the CPU one, e.g. after the GPU device was lost (a forward
    /// returned `Error::Gpu`), keeping `why` in `gpu_unavailable`. `safetensors` are the bytes
    /// the model was loaded from. The new KV cache is empty: the next forward must start at
    /// position 0 with every id so far.
    pub fn fall_back_to_cpu(&mut self, safetensors: &[u8], why: String) -> Result<()> {
        Footprint::cpu(&self.config, self.cpu_dtype, safetensors.len() as u64)?
            .check(crate::platform::memory_limit())?;
        let weights = Gpt2Weights::load(safetensors, &self.config)?;
        self.backend = Backend::Cpu(CpuBackend::new(&self.config, &weights, self.cpu_dtype)?);
        self.gpu_unavailable = Some(why);
        Ok(())
    }

    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from a folder.
    pub fn load_dir(dir: &Path, choice: BackendChoice, cpu_dtype: CpuDtype) -> Result<Model> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| Error::Io {
                path: path.display().to_string(),
                source,
            })
        };
        let (c, w, t) = (
            read("config.json")?,
            read("model.safetensors")?,
            read("tokenizer.json")?,
        );
        pollster::block_on(Model::from_bytes(&c, &w, &t, choice, cpu_dtype))
    }
}
