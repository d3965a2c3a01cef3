//! A checkpoint in shards, as `save_pretrained` writes a big one: `model.safetensors.index.json`
//! (`{"metadata": {…}, "weight_map": {tensor name: file name}}`) beside
//! `model-00001-of-0000N.safetensors` …. The files are streamed one after another in the order
//! their names sort (the order they were written), each through a `Stream` that checks and hands
//! out the tensors the index puts in it; `Files` drives that sequence, and is the one loader of a
//! single file too.

use super::stream::{check_layers, Stream, PREFIX};
use super::{table, TensorRef};
use crate::config::Config;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};

/// What the index says, reduced to what GPT-2 needs: the shards that hold any of its tensors,
/// in order, each with those tensors (unprefixed).
#[derive(Clone, Debug)]
pub struct Index {
    pub shards: Vec<(String, BTreeSet<String>)>,
}

/// The name of an index file.
pub const INDEX: &str = "model.safetensors.index.json";

fn bad(why: impl std::fmt::Display) -> Error {
    Error::WeightsIn {
        file: INDEX.into(),
        msg: why.to_string(),
    }
}

impl Index {
    /// Parses an index and checks it against `config`: every tensor GPT-2 needs is mapped, to a
    /// plain `.safetensors` file name (no folder, so a URL or path built from it stays beside
    /// the index), and no layer lies beyond `n_layer`.
    pub fn parse(json: &[u8], config: &Config) -> Result<Index> {
        let v: serde_json::Value = serde_json::from_slice(json)
            .map_err(|e| bad(format!("not valid JSON (truncated or corrupt?): {e}")))?;
        let map = v
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| bad("no \"weight_map\" object"))?;
        let prefix = if map.contains_key(table::WTE) {
            ""
        } else if map.contains_key(&format!("{PREFIX}{}", table::WTE)) {
            PREFIX
        } else {
            return Err(bad(format!(
                "it maps no \"wte.weight\" (nor \"{PREFIX}wte.weight\"): not a GPT-2 checkpoint"
            )));
        };
        check_layers(map.keys().map(String::as_str), prefix, config).map_err(|e| match e {
            Error::Weights(why) => bad(why),
            e => e,
        })?;
        let mut shards: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for table::Spec { name, .. } in table::tensors(config) {
            let full = format!("{prefix}{name}");
            let file = map
                .get(&full)
                .ok_or_else(|| bad(format!("it does not say which file holds \"{full}\"")))?
                .as_str()
                .ok_or_else(|| bad(format!("the file of \"{full}\" is not a string")))?;
            let plain = !file.is_empty()
                && !file.starts_with('.')
                && !file.contains(['/', '\\', ':', '?', '#', '%'])
                && file.ends_with(".safetensors");
            if !plain {
                return Err(bad(format!(
                    "\"{full}\" is in {file:?}, which is not a .safetensors file beside the index"
                )));
            }
            shards.entry(file).or_default().insert(name);
        }
        Ok(Index {
            shards: shards
                .into_iter()
                .map(|(f, names)| (f.to_string(), names))
                .collect(),
        })
    }
}

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
    /// One weights file (safetensors or GGUF).
    pub fn one(config: &Config) -> Files {
        Files {
            config: config.clone(),
            index: None,
            at: 0,
            stream: Stream::new(config),
            before: 0,
        }
    }

    /// The shards of `index`, in its order.
    pub fn sharded(config: &Config, index: Index) -> Files {
        let first = index.shards.first().map(|(_, names)| names.clone());
        Files {
            config: config.clone(),
            stream: Stream::only(config, first),
            index: Some(index),
            at: 0,
            before: 0,
        }
    }

    /// The shards, when there are several.
    pub fn index(&self) -> Option<&Index> {
        self.index.as_ref()
    }

    /// How many files there are to read.
    pub fn count(&self) -> usize {
        self.index.as_ref().map_or(1, |i| i.shards.len())
    }

    /// The next bytes of the file being read.
    pub fn push(
        &mut self,
        chunk: &[u8],
        sink: &mut dyn FnMut(&str, TensorRef) -> Result<()>,
    ) -> Result<()> {
        self.stream.push(chunk, sink).map_err(|e| self.named(e))
    }

    /// Ends the file being read (every tensor it should hold came) and starts the next one.
    pub fn next_file(&mut self) -> Result<()> {
        self.stream.finish().map_err(|e| self.named(e))?;
        let Some(index) = &self.index else {
            return Err(Error::Weights(format!(
                "a second weights file, but the model has one (no {INDEX})"
            )));
        };
        let Some((_, names)) = index.shards.get(self.at + 1) else {
            return Err(bad(format!(
                "it names {} files, and another one came",
                index.shards.len()
            )));
        };
        self.before += self.stream.bytes();
        self.at += 1;
        self.stream = Stream::only(&self.config, Some(names.clone()));
        Ok(())
    }

    /// Checks that the last file ended whole and no shard is missing.
    pub fn finish(&self) -> Result<()> {
        self.stream.finish().map_err(|e| self.named(e))?;
        if self.at + 1 < self.count() {
            let (file, _) = &self.index.as_ref().expect("several").shards[self.at + 1];
            return Err(bad(format!(
                "only {} of its {} files came; {file} is missing",
                self.at + 1,
                self.count()
            )));
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

    /// An error of a shard names the shard.
    fn named(&self, e: Error) -> Error {
        match (&self.index, e) {
            (Some(i), Error::Weights(msg)) => Error::WeightsIn {
                file: i.shards[self.at].0.clone(),
                msg,
            },
            (_, e) => e,
        }
    }
}
