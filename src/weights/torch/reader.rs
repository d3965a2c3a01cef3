//! The reader of a `torch.save` archive: its entries in order (`torch`'s note), each tensor GPT-2
//! needs handed to the sink once its storage's bytes are in (a storage that a chunk holds whole
//! is read in place, one split across chunks is gathered in a buffer of its size).

use super::layout::Layout;
use super::pickle;
use super::zip;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::header::{Reader, Sink};

/// The most bytes `data.pkl` may have (GPT-2 XL's is under 1 MB) and a small record.
const MAX_PICKLE: usize = 64 << 20;
const MAX_RECORD: usize = 1 << 16;
/// The most bytes the end of central directory record takes, with its comment.
const EOCD_MAX: usize = 22 + 0xFFFF;

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

/// Reads a `torch.save` archive chunk by chunk; see `torch`'s note.
pub struct TorchReader {
    /// The file, as its errors name it (e.g. `pytorch_model.bin`).
    file: String,
    config: Config,
    state: State,
    pending: Vec<u8>,
    pos: u64,
    /// Once `data.pkl` is read: where the tensors wanted lie, by storage.
    layout: Option<Layout>,
    /// The storage being read, for progress.
    current: Option<String>,
    /// `data.pkl` of unknown length is parsed again once `pending` holds this many bytes.
    retry: usize,
    /// Bytes gathered past the pickle's end, to be read again as what follows it.
    replay: Vec<u8>,
}

impl TorchReader {
    /// A reader of `file`, checked against `config`.
    pub fn new(file: &str, config: &Config) -> TorchReader {
        TorchReader {
            file: file.to_string(),
            config: config.clone(),
            state: State::Header,
            pending: Vec::new(),
            pos: 0,
            layout: None,
            current: None,
            retry: 0,
            replay: Vec::new(),
        }
    }

    /// An error of this file.
    fn error(&self, msg: impl std::fmt::Display) -> Error {
        Error::weights(&self.file, msg)
    }

    /// This file is not a `torch.save` archive that can be read.
    fn bad(&self, why: impl std::fmt::Display) -> Error {
        zip::bad(&self.file, why)
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
            return Err(self.bad(format!("no zip entry at byte {start}")));
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
            return Err(self.error(format!(
                "entry \"{name}\" is compressed (method {method}); torch.save stores its \
                 entries, so this file was re-packed: unzip and zip it again with -0"
            )));
        }
        if size == 0xFFFF_FFFF {
            size = zip::zip64_size(&p[30 + n..30 + n + m])
                .ok_or_else(|| self.bad(format!("entry \"{name}\" has no zip64 size")))?;
        }
        let descriptor = flags & 8 != 0;
        let size = (!descriptor || size != 0).then_some(size);
        self.enter(&name, size, descriptor)?;
        Ok(rest)
    }

    /// The entry `name` begins, of `size` bytes where its header says (not with a `descriptor`
    /// after it, as torch's own writer does): data.pkl, a storage's bytes, or something skipped.
    fn enter(&mut self, name: &str, size: Option<u64>, descriptor: bool) -> Result<()> {
        let leaf = name.rsplit('/').next().unwrap_or(name);
        let storage = name
            .rsplit_once("/data/")
            .map(|(_, k)| k)
            .or_else(|| name.strip_prefix("data/"))
            .filter(|k| !k.contains('/'));
        if leaf == "data.pkl" {
            if self.layout.is_some() {
                return Err(self.bad("two data.pkl entries"));
            }
            if let Some(size) = size {
                // A known size (not torch's own writer): the pickle is that long.
                if size > MAX_PICKLE as u64 {
                    return Err(self.bad(format!("data.pkl is over {} MB", MAX_PICKLE >> 20)));
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
            let Some(layout) = &self.layout else {
                return Err(self.bad(format!("entry \"{name}\" comes before data.pkl")));
            };
            let known = layout.storage_bytes.get(key).copied().flatten();
            let size = size.or(known).ok_or_else(|| {
                self.bad(format!("entry \"{name}\" is of no storage data.pkl names"))
            })?;
            // torch.save writes a storage's bytes and nothing more; a size that differs (a stated
            // size of gigabytes on a storage of 512 bytes) is refused before any memory is taken.
            if let Some(k) = known.filter(|&k| k != size) {
                let than = if k > size { "less" } else { "more" };
                let why =
                    format!("entry \"{name}\" holds {size} bytes, {than} than its storage's {k}");
                return Err(self.bad(why));
            }
            self.current = layout.first_in(key).map(str::to_string);
            let key = layout.wants.contains_key(key).then(|| key.to_string());
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
        Ok(())
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
        let parsed = pickle::state_dict(&self.file, &self.pending)?;
        if parsed.is_none() {
            self.retry = self.pending.len() + (self.pending.len() / 2).max(1024);
        }
        match parsed {
            None if self.pending.len() >= MAX_PICKLE => {
                Err(self.bad(format!("data.pkl is over {} MB", MAX_PICKLE >> 20)))
            }
            None => Ok(&chunk[take..]),
            Some((tensors, n)) => {
                let size = n as u64;
                self.layout = Some(Layout::of(&self.file, &tensors, &self.config)?);
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

    /// A storage's bytes (or a skipped entry's, `key` None; `Some("")` is a data.pkl of known
    /// size).
    fn data<'b>(
        &mut self,
        chunk: &'b [u8],
        key: Option<String>,
        size: u64,
        descriptor: bool,
        got: u64,
        sink: &mut Sink,
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
            let size =
                usize::try_from(size).map_err(|_| self.bad("a storage larger than memory"))?;
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
    fn complete(&mut self, key: &str, data: &[u8], sink: &mut Sink) -> Result<()> {
        if key.is_empty() {
            // data.pkl of a known size.
            let (tensors, _) = pickle::state_dict(&self.file, data)?
                .ok_or_else(|| self.bad("data.pkl ends before its STOP"))?;
            self.layout = Some(Layout::of(&self.file, &tensors, &self.config)?);
            return Ok(());
        }
        let layout = self
            .layout
            .as_mut()
            .expect("a storage's bytes come after data.pkl");
        layout.hand_out(&self.file, key, data, sink)?;
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
                let why = format!("a data descriptor says {big} bytes where the entry has {size}");
                return Err(self.bad(why));
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
            _ if self.pending.len() >= MAX_RECORD => Err(self.bad(
                "a record with no data descriptor after it (cut short, or not written by torch.save)",
            )),
            _ => Ok(&chunk[take..]),
        }
    }
}

impl Reader for TorchReader {
    fn push(&mut self, mut chunk: &[u8], sink: &mut Sink) -> Result<()> {
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
                self.push(&again, sink)?;
            }
        }
        Ok(())
    }

    /// Checks that every tensor came, and the archive's end.
    fn finish(&self) -> Result<()> {
        let Some(layout) = &self.layout else {
            let why = format!(
                "it ended after {} bytes, before its data.pkl was read",
                self.pos
            );
            return Err(self.bad(why));
        };
        if let Some(name) = layout.first_missing() {
            return Err(self.error(format!(
                "it ended after {} bytes, before the bytes of {} tensors (\"{name}\" among them; \
                 truncated, or the transfer broke off)",
                self.pos, layout.count
            )));
        }
        if !matches!(self.state, State::End) || !zip::ends_with_directory(&self.pending) {
            return Err(self.error(format!(
                "it ended after {} bytes, before its zip directory (truncated, or the transfer \
                 broke off)",
                self.pos
            )));
        }
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.pos
    }

    fn total(&self) -> Option<u64> {
        None // a zip archive does not say before its end
    }

    fn current(&self) -> Option<&str> {
        self.current.as_deref()
    }
}
