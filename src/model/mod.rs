//! A loaded model: config, tokenizer and a backend, from a Hugging Face style folder (the
//! weights memory-mapped), from a stream of the weights file (the browser: `load::Loader`), or
//! from the three files as bytes; and the one policy above the backends: if the GPU fails mid-run
//! (device lost, out of memory), the model continues on the CPU, rebuilt from the weights read
//! again (the file, or the browser's source of it; never a copy kept in memory), and recomputes
//! the sequence so far, so no token is lost. The loop, the CLI and the browser all get it
//! through `Model::predict`.

mod load;
pub mod load_options;
mod prefix;
pub mod race;

pub use load::{set_software_gpu_races, Loader};
pub use race::BackendTimes;

use crate::backend::cpu::CpuDtype;
use crate::backend::{Backend, BackendChoice, BatchRow};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;
#[cfg(not(target_arch = "wasm32"))]
use crate::weights::shards::{Index, INDEX};
use crate::weights::stream::Source;

/// Where the weights can be had again for a fall-back to the CPU.
pub enum Reload {
    /// The bytes of `model.safetensors`, kept while on the GPU (`Model::from_bytes`).
    Bytes(Vec<u8>),
    /// The file, or the shards in order, mapped again when needed (native).
    #[cfg(not(target_arch = "wasm32"))]
    Files(Vec<std::path::PathBuf>),
    /// A source that reads the file (or the shards) again (the browser).
    Source(Box<dyn Source>),
}

/// Everything needed to generate text.
pub struct Model {
    pub config: Config,
    pub tokenizer: Tokenizer,
    backend: Backend,
    /// Why the model runs on the CPU when the GPU was wanted (`Auto` found no adapter, a software
    /// one, too small limits) or was lost.
    pub gpu_unavailable: Option<String>,
    /// The weight format of the CPU backend, now or after a fall-back (the GPU runs f32).
    pub cpu_dtype: CpuDtype,
    /// Set while on the GPU: where a CPU backend would get its weights, and the files it reads
    /// them as (one, or the shards in order).
    reload: Option<(Reload, crate::weights::files::Files)>,
    /// How many times the backend was replaced (a fall-back): every KV cache is empty after.
    pub epoch: usize,
    /// The ids each KV cache slot holds (prefix caching); every forward below keeps it true.
    kv: prefix::KvHeld,
    /// Multi-token prediction heads (`Draft::Mtp`), when the weights carry them (a GGUF file's
    /// `mtp.*` tensors) or `mtp_heads.safetensors` lies beside them.
    pub mtp: Option<crate::mtp::MtpHeads>,
    /// What `Auto` measured when it raced a GPU against the CPU (`race.rs`), and what it chose.
    pub backend_times: Option<BackendTimes>,
}

impl Model {
    /// Builds a model from the contents of `config.json`, a weights file (`model.safetensors`,
    /// a GGUF file or `pytorch_model.bin`, named `weights_file` by its errors) and
    /// `tokenizer.json`; `cpu_dtype` is the weight format if (or once) it runs on the CPU. On the
    /// GPU the weights' bytes are kept for a fall-back to the CPU; elsewhere they are dropped.
    pub async fn from_bytes(
        config_json: &[u8],
        weights_file: &str,
        weights: Vec<u8>,
        tokenizer_json: &[u8],
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Model> {
        let mut loader =
            Loader::new(config_json, tokenizer_json, weights_file, choice, cpu_dtype).await?;
        loader.push(&weights)?;
        loader.finish(Some(Reload::Bytes(weights))).await
    }

    /// Loads `config.json`, `model.safetensors` (memory-mapped, not read into memory) and
    /// `tokenizer.json` from a folder, or a GGUF file (given itself, or the one `.gguf` of a
    /// folder without `model.safetensors`). On the GPU, a fall-back to the CPU maps the file again.
    /// `Auto` takes the CPU when the GPU cannot hold the model.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir(
        dir: &std::path::Path,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
    ) -> Result<Model> {
        Self::load_dir_with(dir, choice, cpu_dtype, false)
    }

    /// `load_dir`, with the weight matrices in f16 if the model goes to the GPU (`gpu_f16`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir_with(
        dir: &std::path::Path,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
        gpu_f16: bool,
    ) -> Result<Model> {
        let path = weights_file(dir)?;
        // The name errors give the file: as it is called in its folder.
        let name = (path.file_name()).map_or(path.display().to_string(), |n| {
            n.to_string_lossy().into_owned()
        });
        let (c, t, weights) = if crate::weights::gguf::is_gguf_file(&path) {
            // A GGUF file holds the config and the tokenizer in its header.
            let weights = map(&path)?;
            let g = crate::weights::gguf::Gguf::parse_complete(&name, &weights)?;
            // The header's bytes stand for the tokenizer (Loader builds it from its lists).
            let header = weights[..g.data_start.min(weights.len() as u64) as usize].to_vec();
            (g.config_json()?, header, vec![(path.clone(), weights)])
        } else {
            // config.json first: a wrong folder is named by its first file. A safetensors file
            // named itself has its config.json and tokenizer.json beside it.
            let dir = path.parent().unwrap_or(std::path::Path::new("."));
            let c = read(&dir.join("config.json"))?;
            let t = tokenizer_json(dir)?;
            let weights = if path.file_name() == Some(INDEX.as_ref()) {
                let config = Config::from_json(&c)?;
                let index = Index::parse(&read(&path)?, &config)?;
                let paths = index.shards.iter().map(|(f, _)| dir.join(f));
                paths
                    .map(|p| Ok((p.clone(), map(&p)?)))
                    .collect::<Result<_>>()?
            } else {
                vec![(path.clone(), map(&path)?)]
            };
            (c, t, weights)
        };
        let index = path.file_name() == Some(INDEX.as_ref());
        let paths: Vec<_> = weights.iter().map(|(p, _)| p.clone()).collect();
        let build = |choice| {
            pollster::block_on(async {
                let mut loader =
                    Loader::with_gpu_f16(&c, &t, &name, choice, cpu_dtype, gpu_f16).await?;
                if index {
                    loader.sharded(&read(&path)?)?;
                }
                for (i, (_, bytes)) in weights.iter().enumerate() {
                    if i > 0 {
                        loader.next_file()?;
                    }
                    loader.push(bytes)?;
                }
                loader.finish(Some(Reload::Files(paths.clone()))).await
            })
        };
        let mut model = match build(choice) {
            Err(Error::Gpu(why)) if choice == BackendChoice::Auto => {
                let mut model = build(BackendChoice::Cpu)?;
                model.gpu_unavailable = Some(why);
                model
            }
            other => other?,
        };
        let heads = path.with_file_name(crate::mtp::HEADS_FILE);
        if model.mtp.is_none() && heads.is_file() {
            let bytes = read(&heads)?;
            model.mtp = crate::mtp::MtpParts::from_safetensors(
                crate::mtp::HEADS_FILE,
                &bytes,
                &model.config,
            )?;
        }
        Ok(model)
    }

    /// The loop's "predict": the logits of the last of `seq`, whose first `cached` ids the
    /// backend already holds in its KV cache (from earlier calls); the others run at positions
    /// `cached..`. If the GPU fails, the model falls back to the CPU (`gpu_unavailable` says
    /// why) and runs the whole of `seq`.
    pub async fn predict(&mut self, seq: &[u32], cached: usize) -> Result<&[f32]> {
        let new = seq.get(cached..).unwrap_or_default();
        let ran = self.backend.forward(new, cached).await.map(drop);
        let slot = self.backend.active_slot();
        self.kv.keep(slot, cached); // what a failed forward may have written is not trusted
        if self.recover(ran).await? {
            self.kv.wrote(slot, 0, seq);
            return self.backend.forward(seq, 0).await;
        }
        self.kv.wrote(slot, cached, new);
        Ok(&self.backend.logits()[..self.config.vocab_size])
    }

    /// `predict` for several sequences in one forward pass (a batch): each `(slot, seq, cached)`
    /// runs `seq[cached..]` in KV cache slot `slot` (`kv_slots`), and `out` gets the logits of
    /// the last of each seq, (seqs.len(), vocab_size) in the order given. After a fall-back the
    /// slots are made again and every sequence runs whole (`epoch` tells the caller).
    pub async fn predict_batch(
        &mut self,
        seqs: &[(usize, &[u32], usize)],
        out: &mut Vec<f32>,
    ) -> Result<()> {
        fn row(slot: usize, seq: &[u32], cached: usize) -> BatchRow<'_> {
            let ids = seq.get(cached..).unwrap_or_default();
            BatchRow {
                slot,
                ids,
                pos: cached,
            }
        }
        let rows: Vec<BatchRow> = seqs.iter().map(|&(s, q, c)| row(s, q, c)).collect();
        let ran = self.backend.forward_batch(&rows, out).await;
        rows.iter().for_each(|r| self.kv.keep(r.slot, r.pos));
        if self.recover(ran).await? {
            let n = seqs.iter().map(|s| s.0 + 1).max().unwrap_or(1);
            self.backend.kv_slots(n).await?;
            self.kv.resize(n);
            let whole: Vec<BatchRow> = seqs.iter().map(|&(s, q, _)| row(s, q, 0)).collect();
            whole.iter().for_each(|r| self.kv.wrote(r.slot, 0, r.ids));
            return self.backend.forward_batch(&whole, out).await;
        }
        rows.iter()
            .for_each(|r| self.kv.wrote(r.slot, r.pos, r.ids));
        Ok(())
    }

    /// The verification pass of speculative decoding over `seq[cached..]`, the others held in
    /// the KV cache already: the logits of the first `rows_out` new ids, row after row (`more_logits`
    /// gives more), with the same fall-back as `predict` (after which everything before the new
    /// ids is recomputed on the CPU first).
    pub async fn verify(&mut self, seq: &[u32], cached: usize, rows_out: usize) -> Result<&[f32]> {
        let new = seq.get(cached..).unwrap_or_default();
        let v = self.config.vocab_size;
        let rows_out = rows_out.min(new.len());
        let ran = self
            .backend
            .forward_rows(new, cached, rows_out)
            .await
            .map(drop);
        let slot = self.backend.active_slot();
        self.kv.keep(slot, cached);
        if self.recover(ran).await? {
            // Everything before the new ids once, then the new ids as one verification pass.
            if cached > 0 {
                self.backend.forward(&seq[..cached], 0).await?;
            }
            self.kv.wrote(slot, 0, seq);
            return self.backend.forward_rows(new, cached, rows_out).await;
        }
        self.kv.wrote(slot, cached, new);
        Ok(&self.backend.logits()[..rows_out * v])
    }

    /// The fall-back policy, once for every kind of forward: a GPU failure, when the weights
    /// can be had again, moves the model to the CPU (`Ok(true)`: run it again there); other
    /// errors pass through; success is `Ok(false)`.
    async fn recover(&mut self, ran: Result<()>) -> Result<bool> {
        match ran {
            Err(Error::Gpu(why)) if self.reload.is_some() => {
                let why = format!("the GPU failed ({why}); continuing on the CPU");
                self.fall_back_to_cpu(why).await?;
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
        if !self.recover(ran).await? {
            self.kv.resize(n);
        }
        Ok(())
    }

    /// `Backend::kv_use` with the fall-back (see `kv_slots`).
    pub async fn kv_use(&mut self, slot: usize, len: usize) -> Result<()> {
        self.kv.keep(self.backend.active_slot(), len);
        self.kv.keep(slot, len);
        let ran = self.backend.kv_use(slot, len).await;
        self.recover(ran).await.map(drop)
    }

    /// `Backend::kv_copy` with the fall-back (see `kv_slots`).
    pub async fn kv_copy(&mut self, from: usize, to: usize, len: usize) -> Result<()> {
        let ran = self.backend.kv_copy(from, to, len).await;
        if ran.is_ok() {
            self.kv.copy(from, to, len);
        }
        self.recover(ran).await.map(drop)
    }

    /// Prefix caching: of `slots`, the one whose KV cache holds the most of `ids`' first
    /// positions (a generation before this one computed them), leaving the last id to run, and
    /// how many (0 where the backend would not give the same logits from them:
    /// `Backend::rows_alike`); among those holding none, the one used least recently.
    pub fn reusable_in(
        &self,
        ids: &[u32],
        slots: impl Iterator<Item = usize>,
    ) -> Option<(usize, usize)> {
        let alike = self.backend.rows_alike();
        let (slot, n) = self.kv.best(ids, slots)?;
        Some((slot, if alike { n } else { 0 }))
    }

    /// What runs the model, to read (its name, dtype, limits, the last pass's hidden state):
    /// every forward pass goes through `predict`, `predict_batch` or `verify`, which keep the KV
    /// cache's record and the fall-back to the CPU, so nothing runs the backend around them.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The multi-token prediction heads' guesses (`mtp`) of the tokens after row `row` of the
    /// last pass, from its hidden state, into `out` (nothing without heads).
    pub fn guess_ahead(
        &mut self,
        row: usize,
        min_confidence: f32,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        if let Some(heads) = &mut self.mtp {
            let h = self.backend.hidden(row)?;
            heads.guess(h, heads.len(), min_confidence, out);
        }
        Ok(())
    }

    /// Starts timing each phase of each CPU forward (clearing earlier sums), or stops.
    pub fn set_profiling(&mut self, on: bool) {
        self.backend.set_profiling(on);
    }

    /// The logits of rows `from..to` of the last verification pass (`verify`).
    pub fn more_logits(&mut self, from: usize, to: usize) -> Result<&[f32]> {
        self.backend.more_logits(from, to)
    }
}

/// The weights of a model path: a file itself, else the first of the folder's
/// `model.safetensors`, `model.safetensors.index.json` (shards), `pytorch_model.bin` and one
/// `.gguf` file; an error
/// lists what was tried when none is there.
#[cfg(not(target_arch = "wasm32"))]
fn weights_file(path: &std::path::Path) -> Result<std::path::PathBuf> {
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if !path.is_dir() {
        return Ok(path.join("model.safetensors")); // reading it names what is missing
    }
    for name in ["model.safetensors", INDEX, "pytorch_model.bin"] {
        if path.join(name).exists() {
            return Ok(path.join(name));
        }
    }
    let mut ggufs: Vec<_> = std::fs::read_dir(path)
        .map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
        })
        .collect();
    ggufs.sort();
    match &ggufs[..] {
        [one] => Ok(one.clone()),
        [] => Err(Error::Weights {
            file: path.display().to_string(),
            msg: format!(
                "holds no model: looked for model.safetensors, {INDEX} (shards), \
                 pytorch_model.bin and a .gguf file{}",
                if path.join("config.json").exists() {
                    ""
                } else {
                    " (and there is no config.json)"
                }
            ),
        }),
        many => Err(Error::Weights {
            file: path.display().to_string(),
            msg: format!(
                "holds {} .gguf files and no model.safetensors: name the file to load ({})",
                many.len(),
                many.iter()
                    .map(|p| p
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// A folder's `tokenizer.json`, or one made from its `vocab.json` and `merges.txt` when it has
/// those instead; the error names all three when it has neither.
#[cfg(not(target_arch = "wasm32"))]
fn tokenizer_json(dir: &std::path::Path) -> Result<Vec<u8>> {
    let json = dir.join("tokenizer.json");
    let (vocab, merges) = (dir.join("vocab.json"), dir.join("merges.txt"));
    if json.exists() || !vocab.exists() || !merges.exists() {
        return read(&json).map_err(|e| match e {
            Error::Io { path, source } => Error::Io {
                path: format!("{path} (nor vocab.json and merges.txt beside it)"),
                source,
            },
            e => e,
        });
    }
    crate::tokenizer::json_from_vocab_merges(&read(&vocab)?, &read(&merges)?)
}

#[cfg(not(target_arch = "wasm32"))]
fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The file mapped into memory (read-only), or an error naming it.
#[cfg(not(target_arch = "wasm32"))]
fn map(path: &std::path::Path) -> Result<memmap2::Mmap> {
    let io = |source| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the map is read-only and lives while the model loads; a file truncated by another
    // process meanwhile is the one hazard, as for any reader of a mapped file.
    unsafe { memmap2::Mmap::map(&file) }.map_err(io)
}
