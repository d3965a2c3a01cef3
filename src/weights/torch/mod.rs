//! `pytorch_model.bin`: the zip archive `torch.save` writes (since torch 1.6), read as a stream
//! without running anything. Its entries come in order: `<name>/data.pkl` (the state dict as a
//! pickle: each tensor a view of a storage, `pickle`), a few small records, then each storage's
//! bytes as `<name>/data/<key>`, then the central directory. torch writes every entry stored
//! (uncompressed) with its sizes left out of the local header and given in a data descriptor
//! after the data, so the reader learns the pickle's length from its STOP, a storage's from the
//! pickle, and a small record's from the descriptor that ends it. Each tensor GPT-2 needs is
//! handed to the sink once its storage's bytes are in (a storage that a chunk holds whole is read
//! in place, one split across chunks is gathered in a buffer of its size).
//!
//! The older format (before torch 1.6: a bare pickle, tensors after it) is refused with a
//! sentence: re-save it with a current torch, or as safetensors.

mod layout;
pub mod pickle;
mod zip;

use layout::Want;

use super::stream::{check_layers, PREFIX};
use super::{table, DiskDtype, TensorRef};
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::HashMap;

pub use zip::{is_legacy, is_zip, legacy_error};

/// The most bytes `data.pkl` may have (GPT-2 XL's is under 1 MB) and a small record.
const MAX_PICKLE: usize = 64 << 20;
const MAX_RECORD: usize = 1 << 16;
/// The most bytes the end of central directory record takes, with its comment.
const EOCD_MAX: usize = 22 + 0xFFFF;

fn bad(why: impl std::fmt::Display) -> Error {
    Error::Weights(format!(
        "not a valid torch.save archive (truncated or corrupt?): {why}"
    ))
}

/// The errors of this reader name the file as a `.bin`, not as `model.safetensors`.
fn named(e: Error) -> Error {
    match e {
        Error::Weights(msg) => Error::WeightsIn {
            file: "pytorch_model.bin".into(),
            msg,
        },
        e => e,
    }
}

/// Where the reader is in the archive.
#[derive(Clone, Debug)]
enum State {
    /// Gathering a local file header.
    Header,
    /// `data.pkl`'s bytes, gathered until the pickle's STOP.
    Pickle { descriptor: bool },
    /// An entry's bytes: a storage (`key`, of `size` bytes), or a record of unknown size that
    /// its data descriptor ends.
    Data {
        key: Option<String>,
        size: Option<u64>,
        descriptor: bool,
        got: u64,
    },
    /// The data descriptor after an entry of `size` bytes.
    Descriptor { size: u64 },
    /// The central directory and the rest: skipped.
    End,
}

/// Reads a `torch.save` archive chunk by chunk; see the module's note.
pub struct Zip {
    config: Config,
    state: State,
    pending: Vec<u8>,
    pos: u64,
    /// Once `data.pkl` is read: the tensors wanted, by storage key, and every storage's bytes.
    wants: Option<HashMap<String, Vec<Want>>>,
    storage_bytes: HashMap<String, Option<u64>>,
    /// Tensors not handed out yet.
    left: usize,
    /// The storage being read, for progress.
    current: Option<String>,
    /// `data.pkl` of unknown length is parsed again once `pending` holds this many bytes.
    retry: usize,
    /// Bytes gathered past the pickle's end, to be read again as what follows it.
    replay: Vec<u8>,
}

impl Zip {
    pub fn new(config: &Config) -> Zip {
        Zip {
            config: config.clone(),
            state: State::Header,
            pending: Vec::new(),
            pos: 0,
            wants: None,
            storage_bytes: HashMap::new(),
            left: 1,
            current: None,
            retry: 0,
            replay: Vec::new(),
        }
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.pos
    }

    /// The tensor whose bytes come next, as far as the reader knows.
    pub fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }

    /// Takes the next bytes of the file, handing every tensor it completes to `sink`.
    pub fn push(
        &mut self,
        chunk: &[u8],
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<()> {
        self.push_named(chunk, sink).map_err(named)
    }

    fn push_named(
        &mut self,
        mut chunk: &[u8],
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<()> {
        while !chunk.is_empty() {
            let before = chunk.len();
            chunk = match self.state.clone() {
                State::End => {
                    // Keep the end, where the directory's end record must be (`finish`).
                    self.pending
                        .extend_from_slice(&chunk[chunk.len().saturating_sub(EOCD_MAX)..]);
                    let extra = self.pending.len().saturating_sub(EOCD_MAX);
                    self.pending.drain(..extra);
                    &[]
                }
                State::Header => self.header(chunk)?,
                State::Pickle { descriptor } => self.pickle(chunk, descriptor)?,
                State::Descriptor { size } => self.descriptor(chunk, size)?,
                State::Data {
                    key,
                    size: Some(size),
                    descriptor,
                    got,
                } => self.data(chunk, key, size, descriptor, got, sink)?,
                State::Data { size: None, .. } => self.record(chunk)?,
            };
            self.pos += (before - chunk.len()) as u64;
            if !self.replay.is_empty() {
                // Counted once already, as they were gathered.
                let again = std::mem::take(&mut self.replay);
                self.pos -= again.len() as u64;
                self.push_named(&again, sink)?;
            }
        }
        Ok(())
    }

    /// Gathers `n` bytes of a header into `pending`; whether they are all in.
    fn gather<'b>(&mut self, chunk: &'b [u8], n: usize) -> (&'b [u8], bool) {
        let take = n.saturating_sub(self.pending.len()).min(chunk.len());
        self.pending.extend_from_slice(&chunk[..take]);
        (&chunk[take..], self.pending.len() >= n)
    }

    fn header<'b>(&mut self, chunk: &'b [u8]) -> Result<&'b [u8]> {
        let start = self.pos - self.pending.len() as u64;
        let (rest, whole) = self.gather(chunk, 30);
        if !whole {
            return Ok(rest);
        }
        let p = &self.pending;
        if !p.starts_with(b"PK\x03\x04") {
            if p.starts_with(b"PK\x01\x02")
                || p.starts_with(b"PK\x05\x06")
                || p.starts_with(b"PK\x06\x06")
            {
                // The directory: the rest is skipped, its end kept (`State::End`).
                self.state = State::End;
                return Ok(rest);
            }
            return Err(bad(format!("no zip entry at byte {start}")));
        }
        let u16_at = |i: usize| u16::from_le_bytes([p[i], p[i + 1]]) as usize;
        let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().expect("4")) as u64;
        let (flags, method, mut size) = (u16_at(6), u16_at(8), u32_at(18));
        let (n, m) = (u16_at(26), u16_at(28));
        let (rest, whole) = self.gather(rest, 30 + n + m);
        if !whole {
            return Ok(rest);
        }
        let p = std::mem::take(&mut self.pending);
        let name = String::from_utf8_lossy(&p[30..30 + n]).into_owned();
        if method != 0 {
            return Err(Error::Weights(format!(
                "entry \"{name}\" is compressed (method {method}); torch.save \
                 stores its entries, so this file was re-packed: unzip and zip it again with -0"
            )));
        }
        if size == 0xFFFF_FFFF {
            size = zip::zip64_size(&p[30 + n..30 + n + m])
                .ok_or_else(|| bad(format!("entry \"{name}\" has no zip64 size")))?;
        }
        let descriptor = flags & 8 != 0;
        let size = (!descriptor || size != 0).then_some(size);
        let leaf = name.rsplit('/').next().unwrap_or(&name);
        let storage = name
            .rsplit_once("/data/")
            .map(|(_, k)| k)
            .or_else(|| name.strip_prefix("data/"))
            .filter(|k| !k.contains('/'));
        if leaf == "data.pkl" {
            if self.wants.is_some() {
                return Err(bad("two data.pkl entries"));
            }
            if let Some(size) = size {
                // A known size (not torch's own writer): the pickle is that long.
                if size > MAX_PICKLE as u64 {
                    return Err(bad(format!("data.pkl is over {} MB", MAX_PICKLE >> 20)));
                }
                self.state = State::Data {
                    key: Some(String::new()),
                    size: Some(size),
                    descriptor,
                    got: 0,
                };
            } else {
                self.state = State::Pickle { descriptor };
            }
        } else if let Some(key) = storage {
            let Some(wants) = &self.wants else {
                return Err(bad(format!("entry \"{name}\" comes before data.pkl")));
            };
            let known = self.storage_bytes.get(key).copied().flatten();
            let size = size
                .or(known)
                .ok_or_else(|| bad(format!("entry \"{name}\" is of no storage data.pkl names")))?;
            if known.is_some_and(|k| k > size) {
                return Err(bad(format!(
                    "entry \"{name}\" holds {size} bytes, less than its storage's {}",
                    known.unwrap_or(0)
                )));
            }
            let key = wants.contains_key(key).then(|| key.to_string());
            self.current = key
                .as_ref()
                .and_then(|k| wants[k].first())
                .map(|w| w.name.clone());
            self.state = State::Data {
                key,
                size: Some(size),
                descriptor,
                got: 0,
            };
        } else {
            self.state = State::Data {
                key: None,
                size,
                descriptor,
                got: 0,
            };
        }
        Ok(rest)
    }

    /// `data.pkl` of unknown length: gathered until it parses to its STOP.
    fn pickle<'b>(&mut self, chunk: &'b [u8], descriptor: bool) -> Result<&'b [u8]> {
        let had = self.pending.len();
        // Try what this chunk adds (at most doubling what was there), so a mapped file that is
        // one chunk is not copied whole.
        let take = chunk.len().min((had.max(1 << 16)).min(MAX_PICKLE - had));
        self.pending.extend_from_slice(&chunk[..take]);
        // Parsed again only once it has grown by half (a pickle arriving in small chunks is not
        // parsed once per chunk).
        if self.pending.len() < self.retry && self.pending.len() < MAX_PICKLE {
            return Ok(&chunk[take..]);
        }
        let parsed = pickle::state_dict(&self.pending)?;
        if parsed.is_none() {
            self.retry = self.pending.len() + (self.pending.len() / 2).max(1024);
        }
        match parsed {
            None if self.pending.len() >= MAX_PICKLE => {
                Err(bad(format!("data.pkl is over {} MB", MAX_PICKLE >> 20)))
            }
            None => Ok(&chunk[take..]),
            Some((tensors, n)) => {
                let size = n as u64;
                self.plan(tensors)?;
                self.state = if descriptor {
                    State::Descriptor { size }
                } else {
                    State::Header
                };
                if n >= had {
                    self.pending.clear();
                    return Ok(&chunk[n - had..]);
                }
                // It ended in bytes gathered before this chunk: those after it are read again.
                self.replay = self.pending.split_off(n);
                self.pending.clear();
                Ok(&chunk[take..])
            }
        }
    }

    /// The state dict's tensors checked against the config and placed in their storages.
    fn plan(&mut self, tensors: pickle::StateDict) -> Result<()> {
        let l = layout::Layout::of(&tensors, &self.config)?;
        self.storage_bytes = l.storage_bytes;
        self.wants = Some(l.wants);
        self.left = l.count;
        Ok(())
    }

    /// A storage's bytes (or a skipped entry's, `key` None; `Some("")` is a data.pkl of known
    /// size).
    fn data<'b>(
        &mut self,
        chunk: &'b [u8],
        key: Option<String>,
        size: u64,
        descriptor: bool,
        got: u64,
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<&'b [u8]> {
        let need = size - got;
        let take = need.min(chunk.len() as u64) as usize;
        let done = take as u64 == need;
        let next = if descriptor {
            State::Descriptor { size }
        } else {
            State::Header
        };
        let Some(key) = key else {
            self.state = if done {
                next
            } else {
                State::Data {
                    key: None,
                    size: Some(size),
                    descriptor,
                    got: got + take as u64,
                }
            };
            return Ok(&chunk[take..]);
        };
        if done && self.pending.is_empty() {
            // Whole in this chunk: no copy.
            self.complete(&key, &chunk[..take], sink)?;
            self.state = next;
            return Ok(&chunk[take..]);
        }
        if self.pending.is_empty() {
            let size = usize::try_from(size).map_err(|_| bad("a storage larger than memory"))?;
            self.pending.try_reserve_exact(size).map_err(|_| {
                Error::Memory(format!(
                    "a storage of {} MB while it arrives",
                    size.div_ceil(1 << 20)
                ))
            })?;
        }
        self.pending.extend_from_slice(&chunk[..take]);
        if done {
            let data = std::mem::take(&mut self.pending);
            self.complete(&key, &data, sink)?;
            self.state = next;
        } else {
            self.state = State::Data {
                key: Some(key),
                size: Some(size),
                descriptor,
                got: got + take as u64,
            };
        }
        Ok(&chunk[take..])
    }

    /// Hands out the tensors of a storage whose bytes are all in.
    fn complete(
        &mut self,
        key: &str,
        data: &[u8],
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<()> {
        if key.is_empty() {
            // data.pkl of a known size.
            let (tensors, _) =
                pickle::state_dict(data)?.ok_or_else(|| bad("data.pkl ends before its STOP"))?;
            return self.plan(tensors);
        }
        let wants = self.wants.as_mut().expect("after data.pkl");
        for w in wants.remove(key).unwrap_or_default() {
            let bytes = data.get(w.start..w.end).ok_or_else(|| {
                bad(format!(
                    "tensor \"{}\" lies beyond its storage's bytes",
                    w.name
                ))
            })?;
            sink(
                &w.name,
                TensorRef {
                    dtype: w.dtype,
                    shape: w.shape,
                    transposed: w.transposed,
                    data: bytes,
                },
            )?;
            self.left -= 1;
        }
        self.current = None;
        Ok(())
    }

    /// A data descriptor: `PK\x07\x08` (optional), the CRC, then the sizes in 4 or (zip64) 8
    /// bytes each; which one is told by the compressed size, which must be `size`.
    fn descriptor<'b>(&mut self, chunk: &'b [u8], size: u64) -> Result<&'b [u8]> {
        let (rest, whole) = self.gather(chunk, 4);
        if !whole {
            return Ok(rest);
        }
        let sig = if self.pending.starts_with(b"PK\x07\x08") {
            4
        } else {
            0
        };
        let (rest, whole) = self.gather(rest, sig + 8);
        if !whole {
            return Ok(rest);
        }
        let p = &self.pending;
        let small = u32::from_le_bytes(p[sig + 4..sig + 8].try_into().expect("4")) as u64;
        let len = if small == size { sig + 12 } else { sig + 20 };
        let (rest, whole) = self.gather(rest, len);
        if !whole {
            return Ok(rest);
        }
        if len == sig + 20 {
            let big = u64::from_le_bytes(self.pending[sig + 4..sig + 12].try_into().expect("8"));
            if big != size {
                return Err(bad(format!(
                    "a data descriptor says {big} bytes where the entry has {size}"
                )));
            }
        }
        self.pending.clear();
        self.state = State::Header;
        Ok(rest)
    }

    /// A small record of unknown size: its data descriptor (with its signature, as torch writes
    /// it) is found by its compressed size, which equals the bytes before it.
    fn record<'b>(&mut self, chunk: &'b [u8]) -> Result<&'b [u8]> {
        let had = self.pending.len();
        let take = chunk.len().min(MAX_RECORD - had);
        self.pending.extend_from_slice(&chunk[..take]);
        let found = zip::record_end(&self.pending, had);
        match found {
            Some(end) if end > had => {
                self.pending.clear();
                self.state = State::Header;
                Ok(&chunk[end - had..])
            }
            _ if self.pending.len() >= MAX_RECORD => Err(bad(
                "a record with no data descriptor after it (cut short, or not written by torch.save)",
            )),
            _ => Ok(&chunk[take..]),
        }
    }

    /// Checks that every tensor came, and the archive's end.
    pub fn finish(&self) -> Result<()> {
        self.finish_named().map_err(named)
    }

    fn finish_named(&self) -> Result<()> {
        if self.wants.is_none() {
            return Err(bad(format!(
                "it ended after {} bytes, before its data.pkl was read",
                self.pos
            )));
        }
        if self.left > 0 {
            let wants = self.wants.as_ref().expect("read");
            let mut missing: Vec<&str> =
                wants.values().flatten().map(|w| w.name.as_str()).collect();
            missing.sort();
            return Err(Error::Weights(format!(
                "it ended after {} bytes, before the bytes of {} tensors (\"{}\" \
                 among them; truncated, or the transfer broke off)",
                self.pos,
                self.left,
                missing.first().unwrap_or(&"?")
            )));
        }
        // The end of central directory record: 22 bytes and a comment of at most 64 KiB.
        let p = &self.pending;
        let whole = (0..p.len().saturating_sub(21)).rev().any(|i| {
            p[i..].starts_with(b"PK\x05\x06")
                && i + 22 + u16::from_le_bytes([p[i + 20], p[i + 21]]) as usize == p.len()
        });
        if !matches!(self.state, State::End) || !whole {
            return Err(Error::Weights(format!(
                "it ended after {} bytes, before its zip directory (truncated, or \
                 the transfer broke off)",
                self.pos
            )));
        }
        Ok(())
    }
}
