//! The front of the readers: one weights file read as a stream, its format told once from its
//! first bytes (`GGUF`: a GGUF file; `PK\x03\x04`: a `torch.save` zip archive; torch's pickle
//! magic: the format before torch 1.6, refused; anything else: safetensors) and every chunk then
//! handed to that format's reader (`safetensors`, `gguf`, `torch`), which checks the header
//! against the config before any weight arrives and hands each tensor to the sink the moment its
//! last byte is in, so a caller converts it (to q8, or onto the GPU) and the file never has to be
//! held whole. Every error names the file as the caller named it.

use super::gguf::{is_gguf, GgufReader};
use super::header::{Reader, Sink};
use super::safetensors::SafetensorsReader;
use super::torch::{is_legacy, is_zip, legacy_error, TorchReader};
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::BTreeSet;

/// The bytes that tell the formats apart (torch's legacy magic is the longest).
const SNIFF: usize = 8;

/// Reads one weights file chunk by chunk; see the module's note.
pub struct Stream {
    /// The file, as its errors name it (`model.safetensors`, `gpt2.Q8_0.gguf`, …).
    file: String,
    config: Config,
    /// A shard's tensors (`Stream::only`), or every tensor GPT-2 needs.
    only: Option<BTreeSet<String>>,
    /// The first bytes, until there are enough to tell the format.
    first: Vec<u8>,
    /// The format's reader, once told.
    reader: Option<Box<dyn Reader>>,
}

impl Stream {
    /// A stream of `file` (the name its errors give), checked against `config`.
    pub fn new(file: &str, config: &Config) -> Self {
        Self::only(file, config, None)
    }

    /// A stream of one shard of a checkpoint (`shards`), a safetensors file: it must hold the
    /// tensors `only` names (unprefixed), and hands out just those; `None` is every tensor GPT-2
    /// needs.
    pub fn only(file: &str, config: &Config, only: Option<BTreeSet<String>>) -> Self {
        Stream {
            file: file.to_string(),
            config: config.clone(),
            only,
            first: Vec::new(),
            reader: None,
        }
    }

    /// The file, as its errors name it.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        match &self.reader {
            Some(r) => r.bytes(),
            None => self.first.len() as u64,
        }
    }

    /// The file's length, once the header has come (a zip archive does not say).
    pub fn total(&self) -> Option<u64> {
        self.reader.as_ref()?.total()
    }

    /// The tensor whose bytes come next, once the header has come.
    pub fn current(&self) -> Option<&str> {
        self.reader.as_ref()?.current()
    }

    /// Takes the next bytes of the file, handing every tensor it completes to `sink` (by its
    /// unprefixed name), in file order.
    pub fn push(&mut self, chunk: &[u8], sink: &mut Sink) -> Result<()> {
        if let Some(reader) = &mut self.reader {
            return reader.push(chunk, sink);
        }
        if self.first.is_empty() && chunk.len() >= SNIFF {
            // The format told by the chunk itself (a mapped file is one): no copy.
            return self.reader.insert(self.open(chunk)?).push(chunk, sink);
        }
        let take = (SNIFF - self.first.len()).min(chunk.len());
        self.first.extend_from_slice(&chunk[..take]);
        if self.first.len() < SNIFF {
            return Ok(());
        }
        let first = std::mem::take(&mut self.first);
        let reader = self.reader.insert(self.open(&first)?);
        reader.push(&first, sink)?;
        reader.push(&chunk[take..], sink)
    }

    /// The reader of the format that a file starting with `start` is in.
    fn open(&self, start: &[u8]) -> Result<Box<dyn Reader>> {
        let (file, config) = (self.file.as_str(), &self.config);
        let other = |what: &str| {
            let why =
                format!("a shard named by model.safetensors.index.json is {what}, not safetensors");
            Err(Error::weights(file, why))
        };
        Ok(if is_gguf(start) {
            if self.only.is_some() {
                return other("a GGUF file");
            }
            Box::new(GgufReader::new(file, config))
        } else if is_zip(start) {
            if self.only.is_some() {
                return other("a zip archive (pytorch_model.bin)");
            }
            Box::new(TorchReader::new(file, config))
        } else if is_legacy(start) {
            return Err(legacy_error(file));
        } else {
            Box::new(SafetensorsReader::new(file, config, self.only.clone()))
        })
    }

    /// Checks that every tensor came: a stream that ended early is an error naming where.
    pub fn finish(&self) -> Result<()> {
        match &self.reader {
            Some(reader) => reader.finish(),
            None => {
                // Shorter than the bytes that tell the format: its reader says what is missing.
                let mut reader = self.open(&self.first)?;
                reader.push(&self.first, &mut |_, _| Ok(()))?;
                reader.finish()
            }
        }
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
