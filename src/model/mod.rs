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

pub use load::{set_gpu_q8_bytes, set_gpu_subgroups, set_software_gpu_races, Loader};
pub use race::{set_expected_batch, BackendTimes};

use crate::backend::cpu::CpuDtype;
use crate::backend::{Backend, BackendChoice, Seq, Want};
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
    /// Shared, so a front end (`gpt2 serve`) can tokenize while the model runs elsewhere.
    pub tokenizer: std::sync::Arc<Tokenizer>,
    backend: Backend,
    /// Why the model runs on the CPU when the GPU was wanted (`Auto` found no adapter, a software
    /// one, too small limits) or was lost.
    pub gpu_unavailable: Option<String>,
    /// The weight format of the CPU backend, now or after a fall-back (the GPU holds its matrices
    /// in it too, or in f16).
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
    /// Whether the heads pay on this backend (`mtp::HeadsTrial`): measured by the first
    /// `draft: 'mtp'` generations, or a verdict a front end remembered; reset by a fall-back.
    pub heads_trial: crate::mtp::HeadsTrial,
    /// What `Auto` measured when it raced a GPU against the CPU (`race.rs`), and what it chose.
    pub backend_times: Option<BackendTimes>,
}

/// `Model::load_dir_reporting`'s callback: the tensor just converted, the tensor bytes taken in so
/// far, and the weights files' bytes.
#[cfg(not(target_arch = "wasm32"))]
pub type LoadProgress = std::sync::Arc<dyn Fn(&str, u64, u64) + Send + Sync>;

/// A loader's per-tensor hook that reports `progress` as bytes taken in out of `total`.
#[cfg(not(target_arch = "wasm32"))]
fn tensor_hook(progress: LoadProgress, total: u64) -> load::TensorHook {
    let done = std::sync::atomic::AtomicU64::new(0);
    std::sync::Arc::new(move |tensor, bytes| {
        let done = done.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed) + bytes;
        progress(tensor, done, total);
    })
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
        Self::load_dir_reporting(dir, choice, cpu_dtype, gpu_f16, None)
    }

    /// `load_dir_with`, calling `progress` as each tensor is converted with its name, the bytes of
    /// tensor data taken in so far and the weights files' bytes (a load's progress, e.g. the
    /// CLI's bar; a fall-back from the GPU starts again from 0).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_dir_reporting(
        dir: &std::path::Path,
        choice: BackendChoice,
        cpu_dtype: CpuDtype,
        gpu_f16: bool,
        progress: Option<LoadProgress>,
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
        let total: u64 = weights.iter().map(|(_, w)| w.len() as u64).sum();
        let build = |choice| {
            pollster::block_on(async {
                let mut loader =
                    Loader::with_gpu_f16(&c, &t, &name, choice, cpu_dtype, gpu_f16).await?;
                if let Some(progress) = progress.clone() {
                    loader.on_tensor(tensor_hook(progress, total));
                }
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
    /// backend already holds in its KV cache (slot 0, from earlier calls); the others run at
    /// positions `cached..`. If the GPU fails, the model falls back to the CPU
    /// (`gpu_unavailable` says why) and runs the whole of `seq`.
    pub async fn predict(&mut self, seq: &[u32], cached: usize) -> Result<&[f32]> {
        self.pass(&[(0, seq, cached)], Want::Last).await
    }

    /// `predict` for several sequences in one forward pass (a batch): each `(slot, seq, cached)`
    /// runs `seq[cached..]` in KV cache slot `slot` (`kv_slots`); the logits of the last of each
    /// seq, (seqs.len(), vocab_size) in the order given. After a fall-back the slots are made
    /// again and every sequence runs whole (`epoch` tells the caller).
    pub async fn predict_batch(&mut self, seqs: &[(usize, &[u32], usize)]) -> Result<&[f32]> {
        self.pass(seqs, Want::Last).await
    }

    /// `predict_batch` for greedy sequences: only each one's next id, the argmax of its last
    /// row's logits (chosen on the GPU there: a step reads back 4 bytes per sequence). `ahead`:
    /// the caller will most likely ask next for these sequences with these ids appended (the
    /// GPU then starts that step before this one is read back: `Want::ArgmaxAhead`).
    pub async fn predict_argmax(
        &mut self,
        seqs: &[(usize, &[u32], usize)],
        ahead: bool,
    ) -> Result<&[u32]> {
        let want = if ahead {
            Want::ArgmaxAhead
        } else {
            Want::Argmax
        };
        self.pass(seqs, want).await?;
        Ok(self.backend.chosen())
    }

    /// `predict_batch` for sequences that sample from their `k` likeliest tokens at most: each
    /// one's k largest logits and their ids, k after k (`Want::Top`; chosen on the GPU there: a
    /// step reads back 8·k bytes per sequence).
    pub async fn predict_top(
        &mut self,
        seqs: &[(usize, &[u32], usize)],
        k: usize,
    ) -> Result<&[(f32, u32)]> {
        self.pass(seqs, Want::Top(k)).await?;
        Ok(self.backend.top())
    }

    /// The verification pass of speculative decoding over `seq[cached..]` (slot 0), the others
    /// held in the KV cache already: the logits of the first `rows_out` new ids, row after row
    /// (`more_logits` gives more), with the same fall-back as `predict`.
    pub async fn verify(&mut self, seq: &[u32], cached: usize, rows_out: usize) -> Result<&[f32]> {
        let rows_out = rows_out.min(seq.len().saturating_sub(cached));
        self.pass(&[(0, seq, cached)], Want::Every(rows_out)).await
    }

    /// Every forward pass of the model: `Backend::pass` over `seqs[i].1[cached..]` in each slot,
    /// the KV caches' record kept, and the fall-back to the CPU written once: after a GPU failure
    /// the slots are made again there, what each slot held before its new ids is run first, and
    /// then the pass itself (so a verification pass's rows stay as asked).
    async fn pass(&mut self, seqs: &[(usize, &[u32], usize)], want: Want) -> Result<&[f32]> {
        fn new<'a>(&(slot, seq, cached): &(usize, &'a [u32], usize)) -> Seq<'a> {
            let ids = seq.get(cached..).unwrap_or_default();
            Seq {
                slot,
                ids,
                pos: cached,
            }
        }
        let rows: Vec<Seq> = seqs.iter().map(new).collect();
        let ran = self.backend.pass(&rows, want).await.map(|l| l.len());
        rows.iter().for_each(|r| self.kv.keep(r.slot, r.pos)); // a failed pass is not trusted
        let len = match self.recover(ran).await? {
            Some(len) => {
                rows.iter()
                    .for_each(|r| self.kv.wrote(r.slot, r.pos, r.ids));
                len
            }
            None => {
                let n = seqs.iter().map(|s| s.0 + 1).max().unwrap_or(1);
                self.backend.kv_slots(n).await?;
                self.kv.resize(n);
                let before: Vec<Seq> = (seqs.iter())
                    .filter(|s| s.2 > 0)
                    .map(|&(slot, seq, cached)| new(&(slot, &seq[..cached], 0)))
                    .collect();
                if !before.is_empty() {
                    self.backend.pass(&before, Want::Last).await?;
                }
                let len = self.backend.pass(&rows, want).await?.len();
                seqs.iter()
                    .for_each(|&(slot, seq, _)| self.kv.wrote(slot, 0, seq));
                len
            }
        };
        Ok(&self.backend.logits()[..len])
    }

    /// The fall-back policy, once for every call that reaches the backend: a GPU failure, when
    /// the weights can be had again, moves the model to the CPU (`Ok(None)`: run it again
    /// there); other errors pass through; success is `Ok(Some(what it gave))`.
    async fn recover<T>(&mut self, ran: Result<T>) -> Result<Option<T>> {
        match ran {
            Err(Error::Gpu(why)) if self.reload.is_some() => {
                let why = format!("the GPU failed ({why}); continuing on the CPU");
                self.fall_back_to_cpu(why).await?;
                Ok(None)
            }
            Err(e) => Err(e),
            Ok(t) => Ok(Some(t)),
        }
    }

    /// `Backend::kv_slots` with the fall-back: after one (`epoch` changes) the CPU backend has
    /// one empty slot, and the caller makes its slots again and recomputes its sequences.
    pub async fn kv_slots(&mut self, n: usize) -> Result<()> {
        let ran = self.backend.kv_slots(n).await;
        if self.recover(ran).await?.is_some() {
            self.kv.resize(n);
        }
        Ok(())
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
    /// every forward pass goes through `predict`, `predict_batch` or `verify` (one `pass`), which
    /// keep the KV cache's record and the fall-back to the CPU, so nothing runs the backend around them.
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
