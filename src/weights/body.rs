//! The data after a header (safetensors' or GGUF's: both place each tensor at a byte range of
//! the file), read as a stream: each tensor handed to the sink the moment its last byte is in.
//! A tensor that a chunk holds entirely is handed out of the chunk itself; one split across
//! chunks is gathered in a buffer of its own size, freed once it is handed out. Bytes of tensors
//! GPT-2 does not use (the causal-mask buffers, a tied `lm_head`) are skipped.

use super::header::{Header, Sink};
use crate::error::{Error, Result};

/// What each format's streaming reader keeps (`SafetensorsReader`, `GgufReader`): its file's
/// name, the header's bytes until the header is complete, then the body; and the answers to the
/// `Reader` calls that every format gives alike. Only the gathering of the header is the format's.
pub struct Front {
    /// The file, as its errors name it.
    pub file: String,
    /// The header's bytes until it is complete.
    pub pending: Vec<u8>,
    /// The tensors, once the header has come.
    pub body: Option<Body>,
}

impl Front {
    pub fn new(file: &str) -> Front {
        Front {
            file: file.to_string(),
            pending: Vec::new(),
            body: None,
        }
    }

    /// The body after a header that took the file's first `pos` bytes; the header's bytes go.
    pub fn start(&mut self, header: Header, pos: u64) -> &mut Body {
        self.pending = Vec::new();
        self.body.insert(Body::new(&self.file, header, pos))
    }

    /// `Reader::finish`: the body's verdict; before the header was whole, the format's error
    /// (`invalid`) for a file that ended inside it.
    pub fn finish(&self, invalid: &dyn Fn(&str, String) -> Error) -> Result<()> {
        match &self.body {
            Some(body) => body.finish(),
            None => Err(invalid(
                &self.file,
                format!(
                    "it ended after {} bytes, before its header was complete",
                    self.pending.len()
                ),
            )),
        }
    }

    /// `Reader::bytes`: bytes of the file read so far.
    pub fn bytes(&self) -> u64 {
        self.body
            .as_ref()
            .map_or(self.pending.len() as u64, Body::bytes)
    }

    /// `Reader::total`: the file's length, once the header says it.
    pub fn total(&self) -> Option<u64> {
        self.body.as_ref().map(Body::total)
    }

    /// `Reader::current`: the tensor whose bytes come next.
    pub fn current(&self) -> Option<&str> {
        self.body.as_ref()?.current()
    }
}

/// The tensors of `header`, as the bytes after it arrive.
pub struct Body {
    /// The file, as its errors name it.
    file: String,
    header: Header,
    /// The bytes of a tensor split across chunks.
    pending: Vec<u8>,
    /// Bytes of the file consumed (the header's included).
    pos: u64,
    /// The next tensor of `header.tensors` to hand out.
    next: usize,
}

impl Body {
    /// The body of `file` whose header took its first `pos` bytes.
    pub fn new(file: &str, header: Header, pos: u64) -> Body {
        Body {
            file: file.to_string(),
            header,
            pending: Vec::new(),
            pos,
            next: 0,
        }
    }

    /// Bytes of the file read so far.
    pub fn bytes(&self) -> u64 {
        self.pos
    }

    /// The file's length, as the header describes it.
    pub fn total(&self) -> u64 {
        self.header.file_len
    }

    /// The tensor whose bytes come next.
    pub fn current(&self) -> Option<&str> {
        (self.header.tensors.get(self.next)).map(|t| t.name.as_str())
    }

    /// Takes the next bytes of the file, handing every tensor it completes to `sink`.
    pub fn push(&mut self, mut chunk: &[u8], sink: &mut Sink) -> Result<()> {
        while !chunk.is_empty() || self.zero_sized_next() {
            let Some(t) = self.header.tensors.get(self.next) else {
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
            if self.pending.is_empty() && chunk.len() >= need {
                // The whole tensor is in this chunk: no copy.
                sink(&t.name, t.view(&chunk[..need]))?;
                (self.pos, self.next) = (t.end, self.next + 1);
                chunk = &chunk[need..];
                continue;
            }
            if self.pending.is_empty() {
                let size = (t.end - t.start) as usize;
                self.pending.try_reserve_exact(size).map_err(|_| {
                    Error::Memory(format!(
                        "tensor \"{}\" needs {} MB while it arrives",
                        t.name,
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
                sink(&t.name, t.view(&data))?;
                self.next += 1;
            }
        }
        Ok(())
    }

    /// Whether the next tensor has no bytes and is due (handed out without a chunk).
    fn zero_sized_next(&self) -> bool {
        (self.header.tensors.get(self.next))
            .is_some_and(|t| t.start == t.end && self.pos >= t.start)
    }

    /// Checks that every tensor came: a file that ended early is an error naming where.
    pub fn finish(&self) -> Result<()> {
        if let Some(t) = self.header.tensors.get(self.next) {
            return Err(Error::weights(
                &self.file,
                format!(
                    "the weights file ended after {} of its {} bytes, in tensor \"{}\" \
                     (truncated, or the transfer broke off)",
                    self.pos, self.header.file_len, t.stored
                ),
            ));
        }
        Ok(())
    }
}
