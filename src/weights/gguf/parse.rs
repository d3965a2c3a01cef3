//! A GGUF file's header parsed (the layout: `gguf`'s note): its metadata, and its tensors'
//! names, shapes, types and byte ranges, checked as far as the format alone allows. What the
//! header says of a GPT-2 model is `model`'s.

use super::reader::{invalid, Fail, Reader, Value, R};
use crate::error::{Error, Result};
use crate::weights::ggml::GgmlType;
use std::collections::BTreeMap;

/// The most tensors or metadata entries accepted.
const MAX_ENTRIES: u64 = 1 << 20;

/// A tensor table's entry as read: name, shape (`ne`), type, offset from the data's start.
type TensorInfo = (String, Vec<u64>, std::result::Result<GgmlType, String>, u64);

/// A tensor as the header describes it.
#[derive(Clone, Debug)]
pub struct RawTensor {
    pub name: String,
    /// ggml's `ne`: the fastest dimension first.
    pub ne: Vec<u64>,
    pub dtype: std::result::Result<GgmlType, String>,
    /// Byte range from the start of the file.
    pub start: u64,
    pub end: u64,
}

/// A parsed header.
#[derive(Clone, Debug)]
pub struct Gguf {
    /// The file, as its errors name it (e.g. `gpt2.Q8_0.gguf`).
    pub file: String,
    pub version: u32,
    pub metadata: BTreeMap<String, Value>,
    pub tensors: Vec<RawTensor>,
    /// Where the tensor data starts.
    pub data_start: u64,
    /// The file's length as the header describes it (the end of its last tensor).
    pub file_len: u64,
}

/// What `Gguf::parse` found: the header, or how many bytes it needs at least to go on.
pub enum Parsed {
    Header(Box<Gguf>),
    Need(usize),
}

/// Whether `bytes` start like a GGUF file.
pub fn is_gguf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"GGUF")
}

/// Whether the file at `path` starts like a GGUF file (false when it cannot be read).
#[cfg(not(target_arch = "wasm32"))]
pub fn is_gguf_file(path: impl AsRef<std::path::Path>) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|_| is_gguf(&magic))
}

impl Gguf {
    /// The header of `file`, which starts with `bytes`, or how many bytes it needs to be
    /// complete.
    pub fn parse(file: &str, bytes: &[u8]) -> Result<Parsed> {
        // A scan first, which keeps nothing (GPT-2's header holds 100,000 strings): a header that
        // is still arriving costs a walk over its bytes per try, not a parse. The parse runs once
        // the bytes are in, and for a header the scan found wrong (its errors name things).
        if let Err(Fail::Short(n)) = Self::read(&mut Reader::new(file, bytes, false, false)) {
            return Ok(Parsed::Need(n));
        }
        Self::parsed(Self::read(&mut Reader::new(file, bytes, true, true)))
    }

    /// `parse` for the weights' stream: the tensor table and the scalar metadata, every array
    /// (the vocabulary, its token types, its merges) walked and left empty. One walk over the
    /// bytes, which keeps only a few hundred names: the load that streams a file has parsed its
    /// header in full already, for its config and tokenizer (`ggufHead`); a second full parse
    /// of GPT-2's 100,000 strings took the reader from 28 to 37 ms of a load in Node 20's
    /// first tier (docs/performance.md).
    pub fn parse_tables(file: &str, bytes: &[u8]) -> Result<Parsed> {
        Self::parsed(Self::read(&mut Reader::new(file, bytes, true, false)))
    }

    fn parsed(read: R<Gguf>) -> Result<Parsed> {
        match read {
            Ok(g) => Ok(Parsed::Header(Box::new(g))),
            Err(Fail::Short(n)) => Ok(Parsed::Need(n)),
            Err(Fail::Bad(e)) => Err(e),
        }
    }

    /// `parse` of a whole file: running out of bytes is an error.
    pub fn parse_complete(file: &str, bytes: &[u8]) -> Result<Gguf> {
        match Self::parse(file, bytes)? {
            Parsed::Header(g) => Ok(*g),
            Parsed::Need(n) => Err(invalid(
                file,
                format!(
                    "it ended after {} bytes, inside its header (which needs {n} at least)",
                    bytes.len()
                ),
            )),
        }
    }

    fn read(r: &mut Reader) -> R<Gguf> {
        if r.take(4)? != b"GGUF" {
            return Err(r.bad("it does not start with \"GGUF\""));
        }
        let version = r.u32()?;
        if !(2..=3).contains(&version) {
            return Err(Fail::Bad(Error::weights(
                r.file,
                format!("GGUF version {version} is not supported (versions 2 and 3 are)"),
            )));
        }
        let (n_tensors, n_kv) = (r.u64()?, r.u64()?);
        for (what, n) in [("tensors", n_tensors), ("metadata entries", n_kv)] {
            if n > MAX_ENTRIES {
                return Err(r.bad(format!("{n} {what} (at most {MAX_ENTRIES})")));
            }
        }
        let mut metadata = BTreeMap::new();
        for _ in 0..n_kv {
            let key = r.string()?;
            let ty = r.u32()?;
            let v = r.value(ty, 0)?;
            metadata.insert(key, v);
        }
        let tensors = (0..n_tensors)
            .map(|_| Self::tensor_info(r))
            .collect::<R<Vec<_>>>()?;
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(Value::Int(a)) if *a > 0 && *a <= 1 << 20 && (*a as u64).is_power_of_two() => {
                *a as u64
            }
            Some(other) => {
                return Err(r.bad(format!(
                    "general.alignment is {other:?} (a power of two is needed)"
                )))
            }
        };
        let data_start = (r.at as u64).div_ceil(alignment) * alignment;
        let mut out = Vec::new();
        let mut file_len = data_start;
        for (name, ne, dtype, offset) in tensors {
            let t = Self::placed(r, data_start, (name, ne, dtype, offset))?;
            file_len = file_len.max(t.end);
            out.push(t);
        }
        Ok(Gguf {
            file: r.file.to_string(),
            version,
            metadata,
            tensors: out,
            data_start,
            file_len,
        })
    }

    /// One entry of the tensor table: its name, shape, type and offset.
    fn tensor_info(r: &mut Reader) -> R<TensorInfo> {
        let name = r.string()?;
        let n_dims = r.u32()?;
        if !(1..=4).contains(&n_dims) {
            return Err(r.bad(format!(
                "tensor \"{name}\" has {n_dims} dimensions (1 to 4 are possible)"
            )));
        }
        let ne = (0..n_dims).map(|_| r.u64()).collect::<R<Vec<u64>>>()?;
        let dtype = GgmlType::from_id(r.u32()?);
        let offset = r.u64()?;
        Ok((name, ne, dtype, offset))
    }

    /// A tensor of the table at its byte range, its data starting at `data_start`: whole
    /// blocks of its type, no size or offset that overflows.
    fn placed(r: &Reader, data_start: u64, info: TensorInfo) -> R<RawTensor> {
        let (name, ne, dtype, offset) = info;
        {
            let n = ne
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| r.bad(format!("tensor \"{name}\": shape {ne:?} overflows")))?;
            let size = match &dtype {
                Ok(t) => {
                    if ne[0] % t.block_len() as u64 != 0 {
                        return Err(r.bad(format!(
                            "tensor \"{name}\" of type {} has rows of {} values, not whole blocks of {}",
                            t.name(),
                            ne[0],
                            t.block_len()
                        )));
                    }
                    t.bytes_for(n).ok_or_else(|| {
                        r.bad(format!("tensor \"{name}\": shape {ne:?} overflows"))
                    })?
                }
                Err(_) => 0, // only an error if GPT-2 needs it
            };
            let start = data_start
                .checked_add(offset)
                .ok_or_else(|| r.bad(format!("tensor \"{name}\": offset {offset}")))?;
            let end = start
                .checked_add(size)
                .ok_or_else(|| r.bad(format!("tensor \"{name}\": size {size}")))?;
            Ok(RawTensor {
                name,
                ne,
                dtype,
                start,
                end,
            })
        }
    }

    /// An error of this file.
    pub(super) fn error(&self, msg: impl std::fmt::Display) -> Error {
        Error::weights(&self.file, msg)
    }

    pub(super) fn get(&self, key: &str) -> Result<&Value> {
        (self.metadata.get(key))
            .ok_or_else(|| self.error(format!("the GGUF file has no \"{key}\" in its metadata")))
    }

    pub(super) fn int(&self, key: &str) -> Result<i128> {
        match self.get(key)? {
            Value::Int(v) => Ok(*v),
            other => Err(self.error(format!(
                "the GGUF metadata \"{key}\" is {other:?}, not a whole number"
            ))),
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<&str> {
        match self.get(key)? {
            Value::Str(s) => Ok(s),
            other => Err(self.error(format!(
                "the GGUF metadata \"{key}\" is {other:?}, not a string"
            ))),
        }
    }

    pub(super) fn tensor(&self, name: &str) -> Option<&RawTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}
