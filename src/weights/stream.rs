//! `model.safetensors` or a GGUF file (`gguf`, told apart by its first four bytes) read as a
//! stream: the header first (checked against the config before any
//! weight arrives), then each tensor handed to a sink the moment its last byte is in, so a caller
//! converts it (to q8, or onto the GPU) and the file never has to be held whole. A tensor that a
//! chunk holds entirely is handed out of the chunk itself; one split across chunks is gathered in
//! a buffer of its own size, freed once it is handed out. Bytes of tensors GPT-2 does not use
//! (the causal-mask buffers, a tied `lm_head`) are skipped.
//!
//! The layout (https://github.com/huggingface/safetensors): 8 bytes little-endian header length
//! N, N bytes of JSON `{name: {dtype, shape, data_offsets: [start, end]}, "__metadata__": …}`,
//! then the data, offsets relative to its start.

use super::{table, DiskDtype, TensorRef};
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::BTreeSet;

/// The prefix `save_pretrained` gives every name (openai-community/gpt2's files have none).
pub const PREFIX: &str = "transformer.";

/// The most header bytes accepted (the safetensors library's own limit).
const MAX_HEADER: u64 = 100_000_000;

/// A tensor GPT-2 needs, as the header places it.
#[derive(Clone, Debug)]
pub struct TensorInfo {
    /// Without the checkpoint's `transformer.` prefix, e.g. `h.3.mlp.c_fc.weight`.
    pub name: String,
    /// As stored, e.g. `transformer.h.3.mlp.c_fc.weight`.
    pub stored: String,
    pub dtype: DiskDtype,
    /// transformers' shape.
    pub shape: [usize; 2],
    /// Stored transposed (`TensorRef::transposed`).
    pub transposed: bool,
    /// Byte range from the start of the file.
    pub start: u64,
    pub end: u64,
}

/// A parsed and checked header: the tensors GPT-2 needs in file order, and the file's length.
#[derive(Clone, Debug)]
pub struct Header {
    pub tensors: Vec<TensorInfo>,
    /// Where the data ends: the file's length, as the header describes it.
    pub file_len: u64,
}

fn invalid(why: impl std::fmt::Display) -> Error {
    Error::Weights(format!(
        "not a valid safetensors file (truncated or corrupt?): {why}"
    ))
}

impl Header {
    /// The header of a file that starts with `bytes`, or `None` while `bytes` is too short to
    /// hold it. Every tensor `config` needs must be there with its shape, and no layer beyond it.
    pub fn parse(bytes: &[u8], config: &Config) -> Result<Option<Header>> {
        Self::parse_only(bytes, config, None)
    }

    /// `parse` for one shard of a checkpoint: only the tensors `only` names (unprefixed) must be
    /// there, and only they are handed out.
    pub fn parse_only(
        bytes: &[u8],
        config: &Config,
        only: Option<&BTreeSet<String>>,
    ) -> Result<Option<Header>> {
        let Some(len) = bytes.get(..8) else {
            return Ok(None);
        };
        let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
        if n > MAX_HEADER {
            return Err(invalid(format!(
                "a header of {n} bytes (at most {MAX_HEADER})"
            )));
        }
        let Some(json) = bytes.get(8..8 + n as usize) else {
            return Ok(None);
        };
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(json).map_err(invalid)?;
        let data_start = 8 + n;
        let mut stored = std::collections::BTreeMap::new();
        for (name, v) in &map {
            if name == "__metadata__" {
                continue;
            }
            stored.insert(name.as_str(), Entry::parse(name, v)?);
        }
        // The first tensor wanted tells whether the names carry `transformer.`.
        let first = only
            .and_then(|o| o.first())
            .map_or(table::WTE, |n| n.as_str());
        let prefix = if stored.contains_key(first) {
            ""
        } else if stored.contains_key(format!("{PREFIX}{first}").as_str()) {
            PREFIX
        } else {
            return Err(Error::Weights(format!(
                "missing tensor \"{first}\" (also looked for \"{PREFIX}{first}\")"
            )));
        };
        check_layers(stored.keys().copied(), prefix, config)?;
        let data_len = stored.values().map(|e| e.end).max().unwrap_or(0);
        let mut tensors = Vec::new();
        let wanted = table::tensors(config).into_iter();
        for table::Spec { name, shape, .. } in
            wanted.filter(|s| only.is_none_or(|o| o.contains(&s.name)))
        {
            let full = format!("{prefix}{name}");
            let e = stored
                .get(full.as_str())
                .ok_or_else(|| Error::Weights(format!("missing tensor \"{full}\"")))?;
            e.check(&full, shape)?;
            tensors.push(TensorInfo {
                name,
                stored: full,
                dtype: e.dtype.clone().map_err(Error::Weights)?,
                shape,
                transposed: false,
                start: data_start + e.start,
                end: data_start + e.end,
            });
        }
        tensors.sort_by_key(|t| t.start);
        if let Some(w) = tensors.windows(2).find(|w| w[1].start < w[0].end) {
            return Err(invalid(format!(
                "tensors \"{}\" and \"{}\" overlap",
                w[0].stored, w[1].stored
            )));
        }
        Ok(Some(Header {
            tensors,
            file_len: data_start + data_len,
        }))
    }
}

/// One entry of the header as stored.
struct Entry {
    dtype: std::result::Result<DiskDtype, String>,
    shape: Vec<usize>,
    start: u64,
    end: u64,
}

impl Entry {
    fn parse(name: &str, v: &serde_json::Value) -> Result<Entry> {
        let bad = |what: &str| invalid(format!("tensor \"{name}\": {what}"));
        let dtype = v["dtype"].as_str().ok_or_else(|| bad("no dtype"))?;
        let dtype = match dtype {
            "F32" => Ok(DiskDtype::F32),
            "F16" => Ok(DiskDtype::F16),
            "BF16" => Ok(DiskDtype::BF16),
            other => Err(format!(
                "tensor \"{name}\" has dtype {other}; supported are F32, F16 and BF16"
            )),
        };
        let nums = |key: &str| -> Result<Vec<u64>> {
            let arr = v[key].as_array().ok_or_else(|| bad(&format!("no {key}")))?;
            arr.iter()
                .map(|x| {
                    x.as_u64()
                        .ok_or_else(|| bad(&format!("{key} not whole numbers")))
                })
                .collect()
        };
        let shape = nums("shape")?;
        let offsets = nums("data_offsets")?;
        let [start, end] = offsets[..] else {
            return Err(bad("data_offsets is not [start, end]"));
        };
        if start > end {
            return Err(bad("data_offsets end before they start"));
        }
        let shape = (shape.iter())
            .map(|&d| usize::try_from(d).map_err(|_| bad("a dimension too large")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Entry {
            dtype,
            shape,
            start,
            end,
        })
    }

    /// The shape config.json implies (a (1, n) expectation takes the 1-D (n,) of a bias), and a
    /// byte length that matches it.
    fn check(&self, full: &str, shape: [usize; 2]) -> Result<()> {
        let dtype = self.dtype.clone().map_err(Error::Weights)?;
        let ok = if shape[0] == 1 {
            self.shape == [shape[1]] || self.shape == shape
        } else {
            self.shape == shape
        };
        if !ok {
            return Err(Error::Weights(format!(
                "tensor \"{full}\" has shape {:?}, expected {:?} from config.json",
                self.shape,
                if shape[0] == 1 {
                    vec![shape[1]]
                } else {
                    shape.to_vec()
                }
            )));
        }
        let want = (dtype.bytes_for((shape[0] as u64) * (shape[1] as u64)))
            .expect("a float type has blocks of one");
        if self.end - self.start != want {
            return Err(Error::Weights(format!(
                "tensor \"{full}\" holds {} bytes, expected {want}",
                self.end - self.start
            )));
        }
        Ok(())
    }
}

/// A tensor of a layer beyond `n_layer` means the config does not match the weights.
pub(super) fn check_layers<'a>(
    names: impl Iterator<Item = &'a str>,
    prefix: &str,
    config: &Config,
) -> Result<()> {
    for name in names {
        let rest = name.strip_prefix(prefix).unwrap_or(name);
        if let Some(i) = rest.strip_prefix("h.").and_then(|r| r.split('.').next()) {
            if i.parse::<usize>().is_ok_and(|i| i >= config.n_layer) {
                return Err(Error::Weights(format!(
                    "tensor \"{name}\" belongs to a layer beyond n_layer = {} in config.json; \
                     the config does not match the weights",
                    config.n_layer
                )));
            }
        }
    }
    Ok(())
}

/// Reads `model.safetensors` chunk by chunk; see the module's note.
pub struct Stream {
    config: Config,
    /// A shard's tensors (`Stream::only`), or every tensor GPT-2 needs.
    only: Option<BTreeSet<String>>,
    /// A `pytorch_model.bin` (a zip archive) is read by its own reader.
    zip: Option<Box<super::torch::Zip>>,
    header: Option<Header>,
    /// The header's bytes until it is complete, then the bytes of a tensor split across chunks.
    pending: Vec<u8>,
    /// Bytes of the file consumed.
    pos: u64,
    /// The next tensor of `header.tensors` to hand out.
    next: usize,
    /// A GGUF header's bytes are parsed again once `pending` holds this many (it says how many
    /// it needs at least; the count also grows by half each time, so a header that arrives in
    /// small chunks is not parsed once per chunk).
    gguf_retry: usize,
}

impl Stream {
    pub fn new(config: &Config) -> Self {
        Self::only(config, None)
    }

    /// A stream of one shard of a checkpoint (`shards`): it must hold the tensors `only` names
    /// (unprefixed), and hands out just those; `None` is every tensor GPT-2 needs.
    pub fn only(config: &Config, only: Option<BTreeSet<String>>) -> Self {
        Stream {
            config: config.clone(),
            only,
            zip: None,
            header: None,
            pending: Vec::new(),
            pos: 0,
            next: 0,
            gguf_retry: 0,
        }
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        match &self.zip {
            Some(z) => z.bytes(),
            None => self.pos,
        }
    }

    /// The file's length, once the header has come (a zip archive does not say).
    pub fn total(&self) -> Option<u64> {
        self.header.as_ref().map(|h| h.file_len)
    }

    /// The tensor whose bytes come next, once the header has come.
    pub fn current(&self) -> Option<&str> {
        if let Some(z) = &self.zip {
            return z.current();
        }
        let h = self.header.as_ref()?;
        h.tensors.get(self.next).map(|t| t.name.as_str())
    }

    /// Takes the next bytes of the file, handing every tensor it completes to `sink` (by its
    /// unprefixed name), in file order.
    pub fn push(
        &mut self,
        mut chunk: &[u8],
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<()> {
        if self.header.is_none() && self.zip.is_none() {
            let start = if self.pending.is_empty() {
                chunk
            } else {
                &self.pending
            };
            if super::torch::is_zip(start) {
                if self.only.is_some() {
                    return Err(Error::Weights(
                        "a shard named by model.safetensors.index.json is a zip archive \
                         (pytorch_model.bin), not safetensors"
                            .into(),
                    ));
                }
                let mut zip = Box::new(super::torch::Zip::new(&self.config));
                zip.push(&std::mem::take(&mut self.pending), sink)?;
                self.zip = Some(zip);
            }
        }
        if let Some(zip) = &mut self.zip {
            return zip.push(chunk, sink);
        }
        while !chunk.is_empty() || self.zero_sized_next() {
            let Some(header) = &self.header else {
                use super::gguf::{is_gguf, Gguf, Parsed};
                if self.only.is_some() && (is_gguf(chunk) || is_gguf(&self.pending)) {
                    return Err(Error::Weights(
                        "a shard named by model.safetensors.index.json is a GGUF file, not \
                         safetensors"
                            .into(),
                    ));
                }
                if self.pending.is_empty() && is_gguf(chunk) {
                    match Gguf::parse(chunk)? {
                        // The whole header in this chunk (a mapped file): no copy.
                        Parsed::Header(g) => {
                            self.header = Some(g.header(&self.config)?);
                            let at = (g.data_start as usize).min(chunk.len());
                            self.pos = at as u64;
                            chunk = &chunk[at..];
                            continue;
                        }
                        Parsed::Need(n) => self.gguf_retry = n,
                    }
                }
                if is_gguf(&self.pending) || (self.pending.is_empty() && is_gguf(chunk)) {
                    // The whole chunk joins the header's bytes; what follows the header is
                    // pushed again once it has been parsed.
                    if let Some(rest) = self.take_gguf_header(chunk)? {
                        self.push(&rest, sink)?;
                    }
                    break;
                }
                chunk = self.take_header(chunk)?;
                if super::torch::is_zip(&self.pending) {
                    return self.push(chunk, sink); // a zip archive, told by its first 4 bytes
                }
                continue;
            };
            let Some(t) = header.tensors.get(self.next) else {
                self.pos += chunk.len() as u64; // past the last tensor GPT-2 uses
                break;
            };
            if self.pos < t.start {
                let skip = (t.start - self.pos).min(chunk.len() as u64);
                self.pos += skip;
                chunk = &chunk[skip as usize..];
                continue;
            }
            let need = (t.end - self.pos) as usize;
            let (name, dtype, shape, transposed) = (t.name.clone(), t.dtype, t.shape, t.transposed);
            if self.pending.is_empty() && chunk.len() >= need {
                // The whole tensor is in this chunk: no copy.
                sink(
                    &name,
                    TensorRef {
                        dtype,
                        shape,
                        transposed,
                        data: &chunk[..need],
                    },
                )?;
                (self.pos, self.next) = (t.end, self.next + 1);
                chunk = &chunk[need..];
                continue;
            }
            if self.pending.is_empty() {
                let size = (t.end - t.start) as usize;
                self.pending.try_reserve_exact(size).map_err(|_| {
                    Error::Memory(format!(
                        "tensor \"{name}\" needs {} MB while it arrives",
                        size.div_ceil(1 << 20)
                    ))
                })?;
            }
            let take = need.min(chunk.len());
            self.pending.extend_from_slice(&chunk[..take]);
            self.pos += take as u64;
            chunk = &chunk[take..];
            if take == need {
                let data = std::mem::take(&mut self.pending);
                sink(
                    &name,
                    TensorRef {
                        dtype,
                        shape,
                        transposed,
                        data: &data,
                    },
                )?;
                self.next += 1;
            }
        }
        Ok(())
    }

    /// Whether the next tensor has no bytes and is due (handed out without a chunk).
    fn zero_sized_next(&self) -> bool {
        let Some(h) = &self.header else { return false };
        h.tensors
            .get(self.next)
            .is_some_and(|t| t.start == t.end && self.pos >= t.start)
    }

    /// Gathers a GGUF header from `chunk` (taken whole); once it is complete, returns the bytes
    /// that followed it.
    fn take_gguf_header(&mut self, chunk: &[u8]) -> Result<Option<Vec<u8>>> {
        use super::gguf::{Gguf, Parsed, MAX_HEADER};
        self.pending.extend_from_slice(chunk);
        self.pos += chunk.len() as u64;
        if self.pending.len() < self.gguf_retry {
            return Ok(None);
        }
        match Gguf::parse(&self.pending)? {
            Parsed::Need(n) => {
                self.gguf_retry = n.max(self.pending.len() + self.pending.len() / 2);
                if self.pending.len() > MAX_HEADER {
                    return Err(invalid(format!("a GGUF header over {MAX_HEADER} bytes")));
                }
                Ok(None)
            }
            Parsed::Header(g) => {
                let header = g.header(&self.config)?;
                let at = (g.data_start as usize).min(self.pending.len());
                let rest = self.pending.split_off(at);
                self.pos = at as u64;
                self.pending = Vec::new();
                self.header = Some(header);
                Ok(Some(rest))
            }
        }
    }

    /// Gathers the header; returns what of `chunk` follows it.
    fn take_header<'b>(&mut self, chunk: &'b [u8]) -> Result<&'b [u8]> {
        // Four bytes to tell a GGUF file, enough for the length, then exactly to the header's end.
        let want = match self.pending.get(..8) {
            None if self.pending.len() < 4 => 4,
            None if super::gguf::is_gguf(&self.pending) => return Ok(chunk),
            None if super::torch::is_zip(&self.pending) => return Ok(chunk),
            None => 8,
            Some(len) => {
                let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
                if n > MAX_HEADER {
                    return Err(invalid(format!(
                        "a header of {n} bytes (at most {MAX_HEADER})"
                    )));
                }
                8 + n as usize
            }
        };
        let take = (want - self.pending.len()).min(chunk.len());
        self.pending.extend_from_slice(&chunk[..take]);
        self.pos += take as u64;
        if super::torch::is_legacy(&self.pending) {
            return Err(super::torch::legacy_error());
        }
        if let Some(h) = Header::parse_only(&self.pending, &self.config, self.only.as_ref())? {
            self.header = Some(h);
            self.pending = Vec::new();
        }
        Ok(&chunk[take..])
    }

    /// Checks that every tensor came: a stream that ended early is an error naming where.
    pub fn finish(&self) -> Result<()> {
        if let Some(zip) = &self.zip {
            return zip.finish();
        }
        let Some(h) = &self.header else {
            if super::gguf::is_gguf(&self.pending) {
                return Err(Error::Weights(format!(
                    "not a valid GGUF file (truncated or corrupt?): it ended after {} bytes, \
                     before its header was complete",
                    self.pos
                )));
            }
            return Err(invalid(format!(
                "it ended after {} bytes, before its header was complete",
                self.pos
            )));
        };
        if let Some(t) = h.tensors.get(self.next) {
            return Err(Error::Weights(format!(
                "the weights file ended after {} of its {} bytes, in tensor \"{}\" (truncated, \
                 or the transfer broke off)",
                self.pos, h.file_len, t.stored
            )));
        }
        Ok(())
    }
}

/// Where a model's weights can be read again from the start, chunk by chunk (the browser's
/// Cache API, the files the user chose, or the URL): what a fall-back from the GPU to the CPU
/// rebuilds the model from, instead of keeping the file.
pub trait Source {
    /// The next piece of the weights, starting over at the beginning after `Piece::End`.
    fn next_chunk(&mut self) -> NextChunk<'_>;
}

/// What a `Source` gives: bytes of the file being read, the start of the next shard, or the end.
pub enum Piece {
    Bytes(Vec<u8>),
    NextFile,
    End,
}

/// What `Source::next_chunk` returns.
pub type NextChunk<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Piece>> + 'a>>;
