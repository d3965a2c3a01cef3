//! `model.safetensors` (or one shard of it) read as a stream: the header first, checked against
//! the config before any weight arrives, then the tensors (`body::Body`), so a caller converts
//! each (to q8, or onto the GPU) and the file never has to be held whole.
//!
//! The layout (https://github.com/huggingface/safetensors): 8 bytes little-endian header length
//! N, N bytes of JSON `{name: {dtype, shape, data_offsets: [start, end]}, "__metadata__": …}`,
//! then the data, offsets relative to its start.

use super::body::Front;
use super::header::{check_layers, DiskDtype, Header, Reader, Sink, TensorInfo, PREFIX};
use super::table;
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::BTreeSet;

/// The most header bytes accepted (the safetensors library's own limit).
const MAX_HEADER: u64 = 100_000_000;

fn invalid(file: &str, why: impl std::fmt::Display) -> Error {
    Error::weights(
        file,
        format!("not a valid safetensors file (truncated or corrupt?): {why}"),
    )
}

/// The header of `file`, which starts with `bytes`, or `None` while `bytes` is too short to
/// hold it. Every tensor `config` needs must be there with its shape, and no layer beyond it;
/// for one shard of a checkpoint, only the tensors `only` names (unprefixed) must be there,
/// and only they are handed out.
pub fn parse_header(
    file: &str,
    bytes: &[u8],
    config: &Config,
    only: Option<&BTreeSet<String>>,
) -> Result<Option<Header>> {
    let Some(len) = bytes.get(..8) else {
        return Ok(None);
    };
    let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
    if n > MAX_HEADER {
        return Err(invalid(
            file,
            format!("a header of {n} bytes (at most {MAX_HEADER})"),
        ));
    }
    let Some(json) = bytes.get(8..8 + n as usize) else {
        return Ok(None);
    };
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(json).map_err(|e| invalid(file, e))?;
    let data_start = 8 + n;
    let mut stored = std::collections::BTreeMap::new();
    for (name, v) in &map {
        if name == "__metadata__" {
            continue;
        }
        stored.insert(name.as_str(), Entry::parse(file, name, v)?);
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
        return Err(Error::weights(
            file,
            format!("missing tensor \"{first}\" (also looked for \"{PREFIX}{first}\")"),
        ));
    };
    check_layers(file, stored.keys().copied(), prefix, config)?;
    let data_len = stored.values().map(|e| e.end).max().unwrap_or(0);
    let mut tensors = Vec::new();
    let wanted = table::tensors(config).into_iter();
    for table::Spec { name, shape, .. } in
        wanted.filter(|s| only.is_none_or(|o| o.contains(&s.name)))
    {
        let full = format!("{prefix}{name}");
        let e = (stored.get(full.as_str()))
            .ok_or_else(|| Error::weights(file, format!("missing tensor \"{full}\"")))?;
        let dtype = e.check(file, &full, shape)?;
        tensors.push(TensorInfo {
            name,
            stored: full,
            dtype,
            shape,
            transposed: false,
            start: data_start + e.start,
            end: data_start + e.end,
        });
    }
    tensors.sort_by_key(|t| t.start);
    if let Some(w) = tensors.windows(2).find(|w| w[1].start < w[0].end) {
        return Err(invalid(
            file,
            format!(
                "tensors \"{}\" and \"{}\" overlap",
                w[0].stored, w[1].stored
            ),
        ));
    }
    Ok(Some(Header {
        tensors,
        file_len: data_start + data_len,
    }))
}

/// One entry of the header as stored.
struct Entry {
    /// The type, or why it is not one gpt2-web reads (an error only for a tensor GPT-2 needs).
    dtype: std::result::Result<DiskDtype, String>,
    shape: Vec<usize>,
    start: u64,
    end: u64,
}

impl Entry {
    fn parse(file: &str, name: &str, v: &serde_json::Value) -> Result<Entry> {
        let bad = |what: &str| invalid(file, format!("tensor \"{name}\": {what}"));
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

    /// The type, checked with the shape config.json implies (a (1, n) expectation takes the
    /// 1-D (n,) of a bias) and a byte length that matches it.
    fn check(&self, file: &str, full: &str, shape: [usize; 2]) -> Result<DiskDtype> {
        let dtype = self.dtype.clone().map_err(|e| Error::weights(file, e))?;
        let ok = if shape[0] == 1 {
            self.shape == [shape[1]] || self.shape == shape
        } else {
            self.shape == shape
        };
        if !ok {
            let want = match shape[0] {
                1 => vec![shape[1]],
                _ => shape.to_vec(),
            };
            return Err(Error::weights(
                file,
                format!(
                    "tensor \"{full}\" has shape {:?}, expected {want:?} from config.json",
                    self.shape
                ),
            ));
        }
        let want = (dtype.bytes_for((shape[0] as u64) * (shape[1] as u64)))
            .expect("a float type has blocks of one");
        if self.end - self.start != want {
            return Err(Error::weights(
                file,
                format!(
                    "tensor \"{full}\" holds {} bytes, expected {want}",
                    self.end - self.start
                ),
            ));
        }
        Ok(dtype)
    }
}

/// Reads a safetensors file chunk by chunk; see the module's note.
pub struct SafetensorsReader {
    front: Front,
    config: Config,
    /// A shard's tensors, or every tensor GPT-2 needs.
    only: Option<BTreeSet<String>>,
}

impl SafetensorsReader {
    /// A reader of `file`; `only` as in `parse_header`.
    pub fn new(file: &str, config: &Config, only: Option<BTreeSet<String>>) -> Self {
        SafetensorsReader {
            front: Front::new(file),
            config: config.clone(),
            only,
        }
    }

    /// Gathers the header (its length, then exactly to its end); returns what of `chunk`
    /// follows it.
    fn take_header<'b>(&mut self, chunk: &'b [u8]) -> Result<&'b [u8]> {
        let f = &mut self.front;
        let want = match f.pending.get(..8) {
            None => 8,
            Some(len) => {
                let n = u64::from_le_bytes(len.try_into().expect("8 bytes"));
                if n > MAX_HEADER {
                    return Err(invalid(
                        &f.file,
                        format!("a header of {n} bytes (at most {MAX_HEADER})"),
                    ));
                }
                8 + n as usize
            }
        };
        let take = (want - f.pending.len()).min(chunk.len());
        f.pending.extend_from_slice(&chunk[..take]);
        let header = parse_header(&f.file, &f.pending, &self.config, self.only.as_ref())?;
        if let Some(h) = header {
            let pos = f.pending.len() as u64;
            f.start(h, pos);
        }
        Ok(&chunk[take..])
    }
}

impl Reader for SafetensorsReader {
    fn push(&mut self, mut chunk: &[u8], sink: &mut Sink) -> Result<()> {
        while self.front.body.is_none() && !chunk.is_empty() {
            chunk = self.take_header(chunk)?;
        }
        match &mut self.front.body {
            Some(body) => body.push(chunk, sink),
            None => Ok(()),
        }
    }

    fn finish(&self) -> Result<()> {
        self.front.finish(&|file, why| invalid(file, why))
    }

    fn bytes(&self) -> u64 {
        self.front.bytes()
    }

    fn total(&self) -> Option<u64> {
        self.front.total()
    }

    fn current(&self) -> Option<&str> {
        self.front.current()
    }
}
