//! Building a `Model` while its weights file streams in: `config.json` and `tokenizer.json`
//! first (small), the memory check and the backend's choice before a byte of weights is read,
//! then each tensor converted (CPU) or uploaded (GPU) as it arrives (`weights::files`). The
//! browser pushes the chunks of its download; natively the mapped file is one chunk. Errors name
//! the weights file as the caller named it.

use super::{Model, Reload};
use crate::backend::cpu::{CpuBackend, CpuDtype, CpuParts};
use crate::backend::gpu::{GpuOptions, GpuParts};
use crate::backend::{Backend, BackendChoice};
use crate::budget::Footprint;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::mtp::MtpParts;
use crate::tokenizer::Tokenizer;
use crate::weights::files::Files;
use crate::weights::shards::Index;
use crate::weights::stream::Piece;
use std::sync::atomic::{AtomicBool, Ordering};

/// The backend being built.
enum Parts {
    Cpu(CpuParts),
    // Boxed: a device, pipelines and buffers by name.
    Gpu(Box<GpuParts>),
}

/// A model whose weights are arriving.
pub struct Loader {
    config: Config,
    tokenizer: Tokenizer,
    cpu_dtype: CpuDtype,
    files: Files,
    parts: Parts,
    /// Multi-token prediction heads a GGUF file carries (`mtp.*`), and the file's name.
    mtp: MtpParts,
    weights_file: String,
    gpu_unavailable: Option<String>,
    /// `Auto` put the model on a GPU: `finish` races it against the CPU (`race.rs`).
    race: bool,
    /// Called as each tensor is taken in: its name and the bytes of its data.
    on_tensor: Option<TensorHook>,
}

/// `Loader::on_tensor`'s callback: a tensor's name and the bytes of its data.
pub type TensorHook = std::sync::Arc<dyn Fn(&str, u64) + Send + Sync>;

impl Loader {
    /// Checks the config, the tokenizer (`tokenizer.json`, or the bytes of a GGUF file from its
    /// start at least to the end of its header) and the memory the CPU backend would need (before
    /// anything large is allocated), and opens the GPU when it is asked for (`Auto`: when a
    /// hardware adapter fits the model; otherwise the CPU, and `gpu_unavailable` says why).
    /// `weights_file` is the name of the weights file, which its errors give (`model.safetensors`,
    /// `gpt2.Q8_0.gguf`, `pytorch_model.bin`; shards are named by their index, `sharded`).
    pub async fn new(
        config_json: &[u8],
        tokenizer_json: &[u8],
        weights_file: &str,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Loader> {
        Self::with_gpu_f16(
            config_json,
            tokenizer_json,
            weights_file,
            choice,
            cpu_dtype,
            false,
        )
        .await
    }

    /// `new`, with the weight matrices in f16 if the model goes to the GPU (`gpu_f16`).
    pub async fn with_gpu_f16(
        config_json: &[u8],
        tokenizer_json: &[u8],
        weights_file: &str,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
        gpu_f16: bool,
    ) -> Result<Loader> {
        // tokenizer.json, or a GGUF file's header (its lists, built without JSON).
        let tokenizer = if crate::weights::gguf::is_gguf(tokenizer_json) {
            let g = crate::weights::gguf::Gguf::parse_complete(weights_file, tokenizer_json)?;
            g.tokenizer()?
        } else {
            Tokenizer::from_bytes(tokenizer_json)?
        };
        Self::with_tokenizer(
            config_json,
            tokenizer,
            weights_file,
            choice,
            cpu_dtype,
            gpu_f16,
        )
        .await
    }

    /// `with_gpu_f16` with the tokenizer built already (the browser's, from the GGUF header it
    /// parsed to read the config).
    pub async fn with_tokenizer(
        config_json: &[u8],
        tokenizer: Tokenizer,
        weights_file: &str,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
        gpu_f16: bool,
    ) -> Result<Loader> {
        let config = Config::from_json(config_json)?;
        let cpu = || -> Result<Parts> {
            Footprint::streamed_cpu(&config, cpu_dtype)?.check(crate::platform::memory_limit())?;
            Ok(Parts::Cpu(CpuParts::new(&config, cpu_dtype)))
        };
        let mut gpu_unavailable = None;
        let parts = match choice {
            BackendChoice::Cpu => cpu()?,
            BackendChoice::WebGpu => {
                let opts = GpuOptions {
                    f16: gpu_f16,
                    q8: cpu_dtype == CpuDtype::Q8,
                    q8_bytes: flag(&GPU_Q8_BYTES),
                    no_subgroups: flag(&GPU_NO_SUBGROUPS),
                    ..GpuOptions::default()
                };
                Parts::Gpu(Box::new(GpuParts::new(&config, &opts).await?))
            }
            BackendChoice::Auto => {
                let opts = GpuOptions {
                    hardware_only: !flag(&SOFTWARE_GPU_RACES),
                    f16: gpu_f16,
                    q8: cpu_dtype == CpuDtype::Q8,
                    q8_bytes: flag(&GPU_Q8_BYTES),
                    no_subgroups: flag(&GPU_NO_SUBGROUPS),
                    ..GpuOptions::default()
                };
                match GpuParts::new(&config, &opts).await {
                    Ok(gpu) => Parts::Gpu(Box::new(gpu)),
                    Err(e) => {
                        gpu_unavailable = Some(e.to_string());
                        cpu()?
                    }
                }
            }
        };
        Ok(Loader {
            files: Files::one(weights_file, &config),
            mtp: MtpParts::new(&config),
            config,
            tokenizer,
            cpu_dtype,
            parts,
            weights_file: weights_file.to_string(),
            gpu_unavailable,
            race: choice == BackendChoice::Auto,
            on_tensor: None,
        })
    }

    /// Calls `hook` with each tensor's name and data bytes as it is taken in (a native load's
    /// progress: a mapped file arrives in one `push`).
    pub fn on_tensor(&mut self, hook: TensorHook) {
        self.on_tensor = Some(hook);
    }

    /// Whether the weights go to the GPU.
    pub fn on_gpu(&self) -> bool {
        matches!(self.parts, Parts::Gpu(_))
    }

    /// Why the CPU was chosen although the GPU was possible (`Auto`).
    pub fn gpu_unavailable(&self) -> Option<&str> {
        self.gpu_unavailable.as_deref()
    }

    /// Reads the weights from the shards that `model.safetensors.index.json` (given) names,
    /// one after another (`next_file` between them), instead of one file; returns their names.
    /// Called before any bytes are pushed.
    pub fn sharded(&mut self, index_json: &[u8]) -> Result<Vec<String>> {
        if self.files.bytes() > 0 {
            return Err(Error::State(
                "the shards of a checkpoint were named after its weights began".into(),
            ));
        }
        let index = Index::parse(index_json, &self.config)?;
        let names = index.shards.iter().map(|(f, _)| f.clone()).collect();
        self.files = Files::sharded(&self.config, index);
        Ok(names)
    }

    /// The next bytes of the weights file being read.
    pub fn push(&mut self, chunk: &[u8]) -> Result<()> {
        let (parts, mtp, file) = (&mut self.parts, &mut self.mtp, &self.weights_file);
        let hook = self.on_tensor.as_deref();
        self.files.push(chunk, &mut |name, t| {
            let bytes = t.data.len() as u64;
            match parts {
                _ if MtpParts::is_mtp(name) => mtp.add(file, name, t),
                Parts::Cpu(p) => p.add(name, t),
                Parts::Gpu(p) => p.add(name, t),
            }?;
            if let Some(hook) = hook {
                hook(name, bytes);
            }
            Ok(())
        })
    }

    /// Ends one shard (all its tensors came) and starts the next.
    pub fn next_file(&mut self) -> Result<()> {
        self.files.next_file()
    }

    /// Bytes of the weights read so far; the file's length once its header has come; the tensor
    /// whose bytes come next.
    pub fn progress(&self) -> (u64, Option<u64>, Option<&str>) {
        (self.files.bytes(), self.files.total(), self.files.current())
    }

    /// The model, once the whole file has been pushed; an error names what is missing if the
    /// stream ended early. `reload` is how a fall-back from the GPU reads the weights again.
    pub async fn finish(self, reload: Option<Reload>) -> Result<Model> {
        self.files.finish()?;
        let mtp = self.mtp.finish(&self.weights_file, &self.config)?;
        let backend = match self.parts {
            Parts::Cpu(p) => Backend::Cpu(p.finish()?),
            Parts::Gpu(p) => Backend::WebGpu(p.finish().await?),
        };
        let on_gpu = matches!(backend, Backend::WebGpu(_));
        let mut model = Model {
            config: self.config,
            tokenizer: std::sync::Arc::new(self.tokenizer),
            backend,
            gpu_unavailable: self.gpu_unavailable,
            cpu_dtype: self.cpu_dtype,
            reload: if on_gpu {
                reload.map(|r| (r, self.files.again()))
            } else {
                None
            },
            epoch: 0,
            kv: Default::default(),
            mtp,
            heads_trial: Default::default(),
            backend_times: None,
        };
        if self.race {
            model.race().await?;
        }
        Ok(model)
    }
}

impl Model {
    /// Replaces the backend with the CPU one, its weights read again from where the model was
    /// loaded from (the file, or the browser's source), keeping `why` in `gpu_unavailable`.
    /// The new KV cache is empty.
    pub async fn fall_back_to_cpu(&mut self, why: String) -> Result<()> {
        if self.reload.is_none() {
            return Err(Error::State(format!(
                "{why}, but there are no weights to rebuild the model on the CPU from"
            )));
        }
        self.backend = Backend::Cpu(self.cpu_again().await?);
        self.reload = None;
        self.gpu_unavailable = Some(why);
        self.epoch += 1;
        self.heads_trial = Default::default(); // another engine: the heads are measured again
        self.kv.clear(); // the new backend's one KV cache is empty
        self.kv.resize(1);
        Ok(())
    }

    /// A CPU backend built from the weights the model was loaded from (read again), within the
    /// memory budget; the way to read them again stays for another time.
    pub(super) async fn cpu_again(&mut self) -> Result<CpuBackend> {
        let Some((reload, files)) = &mut self.reload else {
            return Err(Error::State(
                "there are no weights to build the model on the CPU from".into(),
            ));
        };
        Footprint::streamed_cpu(&self.config, self.cpu_dtype)?
            .check(crate::platform::memory_limit())?;
        let mut parts = CpuParts::new(&self.config, self.cpu_dtype);
        let mut files = std::mem::replace(files, files.again());
        // The heads were read with the model the first time; the backend's tensors again.
        let mut sink = |name: &str, t: crate::weights::TensorRef<'_>| match name {
            _ if MtpParts::is_mtp(name) => Ok(()),
            _ => parts.add(name, t),
        };
        match reload {
            Reload::Bytes(bytes) => files.push(bytes, &mut sink)?,
            #[cfg(not(target_arch = "wasm32"))]
            Reload::Files(paths) => {
                for (i, path) in paths.iter().enumerate() {
                    if i > 0 {
                        files.next_file()?;
                    }
                    files.push(&super::map(path)?, &mut sink)?;
                }
            }
            Reload::Source(source) => loop {
                match source.next_chunk().await? {
                    Piece::Bytes(chunk) => files.push(&chunk, &mut sink)?,
                    Piece::NextFile => files.next_file()?,
                    Piece::End => break,
                }
            },
        }
        files.finish()?;
        parts.finish()
    }
}

/// Whether `Auto` may take a software adapter (lavapipe, SwiftShader) as if it were hardware and
/// race it (`set_software_gpu_races`).
static SOFTWARE_GPU_RACES: AtomicBool = AtomicBool::new(false);

/// Whether the GPU's q8 kernels take their products a weight at a time everywhere
/// (`set_gpu_q8_bytes`).
static GPU_Q8_BYTES: AtomicBool = AtomicBool::new(false);

/// Lets `Auto` race a software adapter as if it were hardware (where the race must pick the CPU),
/// for the loads after this call: tests and benchmarks on machines without a GPU (the JS API's
/// `raceSoftwareGpu`).
pub fn set_software_gpu_races(on: bool) {
    SOFTWARE_GPU_RACES.store(on, Ordering::Relaxed);
}

/// Makes the loads after this call run the GPU's q8 products a weight at a time, the fallback
/// for a WGSL without dot4I8Packed, even where it has it (`GpuOptions::q8_bytes`): so tests and
/// benchmarks run both kernels on one adapter.
pub fn set_gpu_q8_bytes(on: bool) {
    GPU_Q8_BYTES.store(on, Ordering::Relaxed);
}

/// Whether the GPU's kernels take every stride of their trees through workgroup memory, even
/// where the device has subgroups (`set_gpu_subgroups`).
static GPU_NO_SUBGROUPS: AtomicBool = AtomicBool::new(false);

/// Makes the loads after this call use subgroups for the GPU kernels' trees where the device has
/// them (`on`, the default) or never (`GpuOptions::no_subgroups`): so tests and benchmarks run
/// both on one adapter.
pub fn set_gpu_subgroups(on: bool) {
    GPU_NO_SUBGROUPS.store(!on, Ordering::Relaxed);
}

fn flag(f: &AtomicBool) -> bool {
    f.load(Ordering::Relaxed)
}
