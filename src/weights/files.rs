//! The weights of a model read as a stream from one file, or from the shards an index names
//! (`shards::Index`) one after another: `Files` drives that sequence, one `stream::Stream` per
//! file, each named by its file, and is the one loader of a single file too.

use super::header::Sink;
use super::shards::{Index, INDEX};
use super::stream::Stream;
use crate::config::Config;
use crate::error::{Error, Result};

/// The weights of a model read as a stream from one file, or from shards one after another
/// (`next_file` between them).
pub struct Files {
    config: Config,
    /// The shards, when there are several.
    index: Option<Index>,
    /// The shard being read.
    at: usize,
    stream: Stream,
    /// Bytes of the shards before `at`.
    before: u64,
}

impl Files {
    /// One weights file (safetensors, GGUF or `pytorch_model.bin`), named `file` by its errors.
    pub fn one(file: &str, config: &Config) -> Files {
        Files {
            config: config.clone(),
            index: None,
            at: 0,
            stream: Stream::new(file, config),
            before: 0,
        }
    }

    /// The shards of `index`, in its order, each named by its file.
    pub fn sharded(config: &Config, index: Index) -> Files {
        let (file, first) = index.shards.first().cloned().unwrap_or_default();
        Files {
            config: config.clone(),
            stream: Stream::only(&file, config, Some(first)),
            index: Some(index),
            at: 0,
            before: 0,
        }
    }

    /// The same files again from their start (where a fall-back to the CPU reads them).
    pub fn again(&self) -> Files {
        match &self.index {
            Some(index) => Files::sharded(&self.config, index.clone()),
            None => Files::one(self.stream.file(), &self.config),
        }
    }

    /// How many files there are to read.
    pub fn count(&self) -> usize {
        self.index.as_ref().map_or(1, |i| i.shards.len())
    }

    /// The next bytes of the file being read.
    pub fn push(&mut self, chunk: &[u8], sink: &mut Sink) -> Result<()> {
        self.stream.push(chunk, sink)
    }

    /// Ends the file being read (every tensor it should hold came) and starts the next one.
    pub fn next_file(&mut self) -> Result<()> {
        self.stream.finish()?;
        let Some(index) = &self.index else {
            return Err(Error::weights(
                self.stream.file(),
                format!("a second weights file, but the model has one (no {INDEX})"),
            ));
        };
        let Some((file, names)) = index.shards.get(self.at + 1) else {
            let n = index.shards.len();
            let why = format!("it names {n} files, and another one came");
            return Err(Error::weights(INDEX, why));
        };
        self.before += self.stream.bytes();
        self.at += 1;
        self.stream = Stream::only(file, &self.config, Some(names.clone()));
        Ok(())
    }

    /// Checks that the last file ended whole and no shard is missing.
    pub fn finish(&self) -> Result<()> {
        self.stream.finish()?;
        if self.at + 1 < self.count() {
            let (file, _) = &self.index.as_ref().expect("several").shards[self.at + 1];
            let why = format!(
                "only {} of its {} files came; {file} is missing",
                self.at + 1,
                self.count()
            );
            return Err(Error::weights(INDEX, why));
        }
        Ok(())
    }

    /// Bytes read so far, of all files.
    pub fn bytes(&self) -> u64 {
        self.before + self.stream.bytes()
    }

    /// The bytes of the files read and of the one being read, once its header has come.
    pub fn total(&self) -> Option<u64> {
        self.stream.total().map(|t| self.before + t)
    }

    /// The tensor whose bytes come next.
    pub fn current(&self) -> Option<&str> {
        self.stream.current()
    }
}
