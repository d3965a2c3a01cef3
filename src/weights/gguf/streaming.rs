//! A GGUF file read as a stream: its header gathered (parsed in place when one chunk holds it
//! whole, as a mapped file does), mapped onto transformers' names and checked against the
//! config, then the tensors (`body::Body`) handed out as their bytes arrive.

use super::parse::{Gguf, Parsed};
use super::reader::{invalid, MAX_HEADER};
use crate::config::Config;
use crate::error::Result;
use crate::weights::body::{Body, Front};
use crate::weights::header::{Reader, Sink};

/// Reads a GGUF file chunk by chunk; see the module's note.
pub struct GgufReader {
    front: Front,
    config: Config,
    /// The header is parsed again once `pending` holds this many bytes (it says how many it
    /// needs at least; the count also grows by half each time, so a header that arrives in small
    /// chunks is not parsed once per chunk).
    retry: usize,
}

impl GgufReader {
    /// A reader of `file`, checked against `config` (the one its metadata makes, or another).
    pub fn new(file: &str, config: &Config) -> Self {
        GgufReader {
            front: Front::new(file),
            config: config.clone(),
            retry: 0,
        }
    }

    /// The tensors of a parsed header whose file's first `at` bytes it took.
    fn start(&mut self, g: &Gguf, at: usize) -> Result<&mut Body> {
        let header = g.header(&self.config)?;
        Ok(self.front.start(header, at as u64))
    }
}

impl Reader for GgufReader {
    fn push(&mut self, chunk: &[u8], sink: &mut Sink) -> Result<()> {
        if let Some(body) = &mut self.front.body {
            return body.push(chunk, sink);
        }
        if self.front.pending.is_empty() {
            match Gguf::parse_tables(&self.front.file, chunk)? {
                // The whole header in this chunk (a mapped file): no copy.
                Parsed::Header(g) => {
                    let at = (g.data_start as usize).min(chunk.len());
                    return self.start(&g, at)?.push(&chunk[at..], sink);
                }
                Parsed::Need(n) => self.retry = n,
            }
        }
        // The whole chunk joins the header's bytes; what follows the header is pushed once it
        // has been parsed.
        let f = &mut self.front;
        f.pending.extend_from_slice(chunk);
        if f.pending.len() < self.retry {
            return Ok(());
        }
        match Gguf::parse_tables(&f.file, &f.pending)? {
            Parsed::Need(n) => {
                self.retry = n.max(f.pending.len() + f.pending.len() / 2);
                if f.pending.len() > MAX_HEADER {
                    return Err(invalid(
                        &f.file,
                        format!("a GGUF header over {MAX_HEADER} bytes"),
                    ));
                }
                Ok(())
            }
            Parsed::Header(g) => {
                let at = (g.data_start as usize).min(f.pending.len());
                let rest = f.pending.split_off(at);
                self.start(&g, at)?.push(&rest, sink)
            }
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
