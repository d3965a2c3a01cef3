//! A checkpoint in shards, as `save_pretrained` writes a big one: `model.safetensors.index.json`
//! (`{"metadata": {…}, "weight_map": {tensor name: file name}}`) beside
//! `model-00001-of-0000N.safetensors` …, read and checked here. The shards are streamed one after
//! another in the order their names sort (the order they were written), each through a stream
//! that checks and hands out the tensors the index puts in it (`files::Files`).

use super::header::{check_layers, PREFIX};
use super::table;
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
    Error::weights(INDEX, why)
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
        check_layers(INDEX, map.keys().map(String::as_str), prefix, config)?;
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
