//! What a model will take in memory, computed from `config.json` alone before anything is
//! allocated, and the check against what this build can address. Every product is u64 checked
//! arithmetic: a config whose sizes pass one by one but multiply past any memory (a KV cache of
//! `n_positions` 2^20 × `n_layer` 1000) is refused with a sentence, not a wrapped `usize` or an
//! allocation that aborts the wasm instance.
//!
//! The figures follow the allocations of `backend::cpu` (weights in their runtime format, the
//! per-head KV cache, the scratch buffers at a full context) and of loading (the file's bytes, and
//! one tensor widened to f32 while it is converted).

use crate::backend::cpu::CpuDtype;
use crate::config::Config;
use crate::error::{Error, Result};

/// Bytes of one q8 block of 32 weights: 32 one-byte weights and an f32 scale.
const Q8_BLOCK_BYTES: u64 = 32 + 4;

/// The memory a model needs on the CPU, in bytes, by part.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Footprint {
    /// Bytes of `model.safetensors` held at once while the model is built: the whole file when
    /// it is loaded from memory, one tensor (the largest, f32 on disk at most) when it streams.
    pub file: u64,
    /// The weights in their runtime format (q8 or f32).
    pub weights: u64,
    /// Keys and values of every layer for the whole context, f32.
    pub kv_cache: u64,
    /// Working buffers of a forward over a full context, and the logits.
    pub activations: u64,
    /// Working memory of converting a tensor: none for q8 (quantized from the file's bytes), the
    /// largest tensor's f32 copy for f32 (Conv1D weights are transposed through one).
    pub conversion: u64,
    /// The weights' runtime format, for the advice of a refusal.
    #[serde(skip)]
    pub dtype: CpuDtype,
}

/// Checked u64 arithmetic that names what overflowed.
fn mul(parts: &[u64]) -> Result<u64> {
    parts
        .iter()
        .try_fold(1u64, |acc, &p| acc.checked_mul(p))
        .ok_or_else(|| Error::Config("its sizes multiply past any memory".into()))
}

fn add(parts: &[u64]) -> Result<u64> {
    parts
        .iter()
        .try_fold(0u64, |acc, &p| acc.checked_add(p))
        .ok_or_else(|| Error::Config("its sizes add up past any memory".into()))
}

impl Footprint {
    /// The CPU backend's footprint for `config` at `dtype`, loading a file of `file_bytes`.
    pub fn cpu(config: &Config, dtype: CpuDtype, file_bytes: u64) -> Result<Footprint> {
        let (l, c, h, v, t) = (
            config.n_layer as u64,
            config.n_embd as u64,
            config.n_inner as u64,
            config.vocab_size as u64,
            config.n_positions as u64,
        );
        // A matrix of `rows` outputs over `cols` inputs in the runtime format (q8 pads rows to
        // groups of 4 and columns to blocks of 32).
        let matrix = |rows: u64, cols: u64| -> Result<u64> {
            match dtype {
                CpuDtype::F32 => mul(&[rows, cols, 4]),
                CpuDtype::Q8 => mul(&[rows.div_ceil(4) * 4, cols.div_ceil(32), Q8_BLOCK_BYTES]),
            }
        };
        let block = add(&[
            matrix(3 * c, c)?,
            matrix(c, c)?,
            matrix(h, c)?,
            matrix(c, h)?,
            mul(&[4 * c + 3 * c + c + h + c, 4])?, // LayerNorms and biases, f32
        ])?;
        // The blocks, wte (the tied head), wpe and ln_f (f32).
        let weights = add(&[
            mul(&[l, block])?,
            matrix(v, c)?,
            mul(&[t, c, 4])?,
            2 * c * 4,
        ])?;
        // Keys and values: f32, or with q8 weights 8-bit per head (`q8::kv`): keys (positions
        // in groups of 4 × head_size in blocks of 32, a scale per block), values transposed
        // (head_size in groups of 4 × positions in blocks of 32, a scale per block) and a scale
        // per position.
        let kv_cache = match dtype {
            CpuDtype::F32 => mul(&[2, l, t, c, 4])?,
            CpuDtype::Q8 => {
                let (nh, hs) = (config.n_head as u64, config.head_size() as u64);
                let (rows, blocks) = (t.div_ceil(4) * 4, hs.div_ceil(32));
                let keys = mul(&[rows, blocks, 32 + 4])?;
                let (rows, blocks) = (hs.div_ceil(4) * 4, t.div_ceil(32));
                let values = add(&[mul(&[rows, blocks, 32 + 4])?, mul(&[t, 4])?])?;
                mul(&[l, nh, add(&[keys, values])?])?
            }
        };
        // x, h, qkv (3), a: 6C per row (7C with q8: attention's outputs head by head); the MLP's
        // H; the q8 activations (one byte a value); the logits of a verification pass
        // (speculative decoding), MAX_VERIFY rows; with q8, attention's scores, 32 query rows
        // over n_ctx positions at a time, as f32 and as bytes (one thread's).
        let per_row = match dtype {
            CpuDtype::F32 => 6 * c + h,
            CpuDtype::Q8 => 7 * c + h,
        };
        let scores = match dtype {
            CpuDtype::F32 => 0,
            CpuDtype::Q8 => mul(&[32, t, 5])?,
        };
        let activations = add(&[
            scores,
            mul(&[t, per_row, 4])?,
            mul(&[t, c.max(h) + c.max(h) / 8])?,
            mul(&[crate::config::MAX_VERIFY as u64, v, 4])?,
        ])?;
        let largest = (v * c).max(c * h).max(3 * c * c).max(t * c);
        // q8 is quantized straight from the file's bytes; f32 Conv1D weights are transposed
        // through one copy.
        let conversion = match dtype {
            CpuDtype::F32 => mul(&[largest, 4])?,
            CpuDtype::Q8 => 0,
        };
        Ok(Footprint {
            file: file_bytes,
            weights,
            kv_cache,
            activations,
            conversion,
            dtype,
        })
    }

    /// The CPU backend's footprint when the weights stream in: one tensor's bytes at a time
    /// (as f32, the widest a file stores) instead of the whole file.
    pub fn streamed_cpu(config: &Config, dtype: CpuDtype) -> Result<Footprint> {
        let (c, h, v, t) = (
            config.n_embd as u64,
            config.n_inner as u64,
            config.vocab_size as u64,
            config.n_positions as u64,
        );
        let largest = (v * c).max(c * h).max(3 * c * c).max(t * c);
        Footprint::cpu(config, dtype, mul(&[largest, 4])?)
    }

    /// The most memory held at once: while the last tensor converts, with the file still there.
    pub fn peak(&self) -> u64 {
        self.file
            .saturating_add(self.weights)
            .saturating_add(self.kv_cache)
            .saturating_add(self.activations)
            .saturating_add(self.conversion)
    }

    /// Refuses a model whose peak does not fit `limit` bytes (`what` names the limit).
    pub fn check(&self, limit: Option<(u64, &str)>) -> Result<()> {
        let Some((limit, what)) = limit else {
            return Ok(());
        };
        if self.peak() <= limit {
            return Ok(());
        }
        // What could fit instead: q8 if these are f32, one thread if this is the threads build.
        let mut instead = vec![];
        if self.dtype == CpuDtype::F32 {
            instead.push("q8 weights");
        }
        if what == crate::platform::THREADED_LIMIT {
            instead.push("one thread (the single-threaded build addresses 4 GiB)");
        }
        instead.extend(["a smaller model", "a shorter context"]);
        let last = instead.pop().unwrap_or_default();
        Err(Error::Budget(format!(
            "the model needs about {} of memory ({} weights, {} KV cache, {} working buffers, \
             while loading also the {} file), more than {what} ({}); try {} or {last}",
            gib(self.peak()),
            gib(self.weights),
            gib(self.kv_cache),
            gib(self.activations),
            gib(self.file),
            gib(limit),
            instead.join(", "),
        )))
    }
}

/// Bytes in words: "1.23 GiB", "456 MiB".
pub fn gib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.0} MiB", (b / (1u64 << 20) as f64).max(1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Config {
        Config::from_json(json.as_bytes()).unwrap()
    }

    #[test]
    fn gpt2_small_q8_weights_are_about_a_quarter_of_f32() {
        let c = config(
            r#"{"n_layer":12,"n_head":12,"n_embd":768,"n_positions":1024,"vocab_size":50257}"#,
        );
        let f32 = Footprint::cpu(&c, CpuDtype::F32, 0).unwrap();
        let q8 = Footprint::cpu(&c, CpuDtype::Q8, 0).unwrap();
        // 124.4 M parameters, 4 bytes each: the f32 figure is the parameter count × 4.
        assert_eq!(f32.weights, c.n_params() as u64 * 4);
        let ratio = q8.weights as f64 / f32.weights as f64;
        assert!((0.28..0.30).contains(&ratio), "q8/f32 = {ratio}");
        assert_eq!(f32.kv_cache, 2 * 12 * 1024 * 768 * 4);
        // 8-bit keys and values: 29% of f32.
        assert_eq!(
            q8.kv_cache,
            12 * 12 * (1024 * 2 * 36 + 64 * 32 * 36 + 1024 * 4)
        );
    }

    #[test]
    fn an_absurd_config_is_refused_with_a_sentence_not_an_overflow() {
        let c = config(
            r#"{"n_layer":1000,"n_head":1,"n_embd":262144,"n_positions":1048576,"vocab_size":1048576}"#,
        );
        let err = Footprint::cpu(&c, CpuDtype::Q8, 0)
            .and_then(|f| f.check(Some((4 << 30, "the 4 GiB a wasm32 build can address"))))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("past any memory") || err.contains("more than the 4 GiB"),
            "{err}"
        );
    }

    #[test]
    fn a_model_over_the_limit_names_its_size_and_the_limit() {
        let c = config(
            r#"{"n_layer":48,"n_head":25,"n_embd":1600,"n_positions":1024,"vocab_size":50257}"#,
        );
        let f = Footprint::cpu(&c, CpuDtype::F32, 6_431_000_000).unwrap();
        let err = f
            .check(Some((2 << 30, "the 2 GiB of the threads build")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("GiB of memory")
                && err.contains("the 2 GiB of the threads build (2.00 GiB)"),
            "{err}"
        );
        assert!(
            err.ends_with("try q8 weights, a smaller model or a shorter context"),
            "{err}"
        );
        // q8 in the threads build: the advice is one thread, not q8.
        let q8 = Footprint::cpu(&c, CpuDtype::Q8, 0).unwrap();
        let err = q8
            .check(Some((1 << 30, crate::platform::THREADED_LIMIT)))
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with(
                "try one thread (the single-threaded build addresses 4 GiB), a smaller model \
                 or a shorter context"
            ),
            "{err}"
        );
        assert!(f.check(None).is_ok());
        assert!(f.check(Some((u64::MAX, "everything"))).is_ok());
    }
}
