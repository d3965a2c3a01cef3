//! A GGUF file read as a stream: its header gathered (parsed in place when one chunk holds it
//! whole, as a mapped file does), mapped onto transformers' names and checked against the
//! config, then the tensors (`body::Body`) handed out as their bytes arrive.

use super::parse::{Gguf, Parsed};
use super::reader::{invalid, MAX_HEADER};
use crate::config::Config;
use crate::error::Result;
use crate::weights::body::Body;
use crate::weights::header::{Reader, Sink};

/// Reads a GGUF file chunk by chunk; see the module's note.
pub struct GgufReader {
    file: String,
    config: Config,
    /// The header's bytes until it is complete.
    pending: Vec<u8>,
    /// The header is parsed again once `pending` holds this many bytes (it says how many it
    /// needs at least; the count also grows by half each time, so a header that arrives in small
    /// chunks is not parsed once per chunk).
    retry: usize,
    /// The tensors, once the header has come.
    body: Option<Body>,
}

impl GgufReader {
    /// A reader of `file`, checked against `config` (the one its metadata makes, or another).
    pub fn new(file: &str, config: &Config) -> Self {
        GgufReader {
            file: file.to_string(),
            config: config.clone(),
            pending: Vec::new(),
            retry: 0,
            body: None,
        }
    }

    /// The tensors of a parsed header whose file's first `at` bytes it took.
    fn start(&mut self, g: &Gguf, at: usize) -> Result<&mut Body> {
        let header = g.header(&self.config)?;
        Ok(self.body.insert(Body::new(&self.file, header, at as u64)))
    }
}

impl Reader for GgufReader {
    fn push(&mut self, chunk: &[u8], sink: &mut Sink) -> Result<()> {
        if let Some(body) = &mut self.body {
            return body.push(chunk, sink);
        }
        if self.pending.is_empty() {
            match Gguf::parse(&self.file, chunk)? {
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
        self.pending.extend_from_slice(chunk);
        if self.pending.len() < self.retry {
            return Ok(());
        }
        match Gguf::parse(&self.file, &self.pending)? {
            Parsed::Need(n) => {
                self.retry = n.max(self.pending.len() + self.pending.len() / 2);
                if self.pending.len() > MAX_HEADER {
                    return Err(invalid(
                        &self.file,
                        format!("a GGUF header over {MAX_HEADER} bytes"),
                    ));
                }
                Ok(())
            }
            Parsed::Header(g) => {
                let at = (g.data_start as usize).min(self.pending.len());
                let rest = self.pending.split_off(at);
                self.pending = Vec::new();
                self.start(&g, at)?.push(&rest, sink)
            }
        }
    }

    fn finish(&self) -> Result<()> {
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

    fn bytes(&self) -> u64 {
        self.body
            .as_ref()
            .map_or(self.pending.len() as u64, Body::bytes)
    }

    fn total(&self) -> Option<u64> {
        self.body.as_ref().map(Body::total)
    }

    fn current(&self) -> Option<&str> {
        self.body.as_ref()?.current()
    }
}
