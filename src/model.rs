//! A loaded model: config, tokenizer and a backend, from a Hugging Face style folder or from
//! the same three files as bytes (the browser has no file system).

use crate::backend::{cpu::CpuBackend, Backend, BackendChoice};
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
}

impl Model {
    /// Builds a model from the contents of `config.json`, `model.safetensors` and `tokenizer.json`.
    pub async fn from_bytes(
        config_json: &[u8],
        safetensors: &[u8],
        tokenizer_json: &[u8],
        choice: BackendChoice,
    ) -> Result<Model> {
        let config = Config::from_json(config_json)?;
        let weights = Gpt2Weights::load(safetensors, &config)?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json)?;
        let backend = match choice {
            BackendChoice::Cpu | BackendChoice::Auto => Backend::Cpu(CpuBackend::new(&config, &weights)?),
            BackendChoice::Gpu => {
                return Err(Error::Backend(
                    "the WebGPU backend is not available in this build; use backend \"cpu\" or \"auto\"".into(),
                ))
            }
        };
        Ok(Model {
            config,
            tokenizer,
            backend,
        })
    }

    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from a folder.
    pub fn load_dir(dir: &Path, choice: BackendChoice) -> Result<Model> {
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
        pollster::block_on(Model::from_bytes(&c, &w, &t, choice))
    }
}
