//! The bodies of the fuzz targets (`tools/fuzz`, cargo-fuzz), kept in the library so that
//! `cargo test` replays the crash inputs they found (`tests/fixtures/fuzz/`, by
//! `tests/fuzz_regressions.rs`) on stable Rust, without libFuzzer. Each function must return for
//! any input: an error is a pass, a panic or an abort is a crash.

use crate::backend::{cpu::CpuDtype, BackendChoice};
use crate::budget::Footprint;
use crate::config::Config;
use crate::model::Model;
use crate::tokenizer::{Detokenizer, Tokenizer};

/// Models bigger than this are skipped: the budget refuses them (tested on its own), and the
/// fuzzer is after crashes in parsing and building, not in allocating gigabytes.
const MAX_PEAK: u64 = 64 << 20;

/// A small byte-level BPE tokenizer.json for the model target (the same as its seed).
pub const TOKENIZER_JSON: &[u8] = include_bytes!("../tools/fuzz/seeds/load_tokenizer/tiny.json");

/// Input: the config's length as two little-endian bytes, config.json, then the weights file
/// (model.safetensors, or a pytorch_model.bin: the stream tells them apart). Streams the file in
/// 7-byte chunks with every tensor widened to f32, then builds the model on the CPU with both
/// weight formats and runs one forward pass.
pub fn load_model(data: &[u8]) {
    let Some((config, weights)) = two_files(data) else {
        return;
    };
    let Ok(parsed) = Config::from_json(config) else {
        return;
    };
    match Footprint::cpu(&parsed, CpuDtype::F32, weights.len() as u64) {
        Ok(f) if f.peak() <= MAX_PEAK => {}
        _ => return,
    }
    let mut stream = crate::weights::stream::Stream::new("model.safetensors", &parsed);
    let mut widen = |_: &str, t: crate::weights::TensorRef| t.try_to_f32().map(drop);
    if weights
        .chunks(7)
        .all(|c| stream.push(c, &mut widen).is_ok())
    {
        let _ = stream.finish();
    }
    for dtype in [CpuDtype::F32, CpuDtype::Q8] {
        match Footprint::cpu(&parsed, dtype, weights.len() as u64) {
            Ok(f) if f.peak() <= MAX_PEAK => {}
            _ => return,
        }
        let built = Model::from_bytes(
            config,
            "model.safetensors",
            weights.to_vec(),
            TOKENIZER_JSON,
            BackendChoice::Cpu,
            dtype,
        );
        if let Ok(mut model) = pollster::block_on(built) {
            let _ = pollster::block_on(model.predict(&[0, 1], 0));
            let _ = pollster::block_on(model.predict(&[0, 1, 2], 2));
        }
    }
}

/// Input: a GGUF file. Reads its config and tokenizer from the header (the tokenizer built from
/// its lists, as a load does), builds the model on the
/// CPU with both weight formats and runs one forward pass, and streams the file in 7-byte chunks
/// with every tensor widened to f32.
pub fn load_gguf(data: &[u8]) {
    use crate::weights::gguf::Gguf;
    let Ok(g) = Gguf::parse_complete("model.gguf", data) else {
        return;
    };
    let (Ok(config), Ok(_)) = (g.config_json(), g.tokenizer_lists()) else {
        return;
    };
    // The file's own bytes stand for the tokenizer, as in the browser: built from its lists.
    let tokenizer = data;
    let Ok(parsed) = Config::from_json(&config) else {
        return;
    };
    match Footprint::cpu(&parsed, CpuDtype::F32, data.len() as u64) {
        Ok(f) if f.peak() <= MAX_PEAK => {}
        _ => return,
    }
    let mut stream = crate::weights::stream::Stream::new("model.gguf", &parsed);
    let mut widen = |_: &str, t: crate::weights::TensorRef| t.try_to_f32().map(drop);
    if data.chunks(7).all(|c| stream.push(c, &mut widen).is_ok()) {
        let _ = stream.finish();
    }
    for dtype in [CpuDtype::F32, CpuDtype::Q8] {
        let built = Model::from_bytes(
            &config,
            "model.gguf",
            data.to_vec(),
            tokenizer,
            BackendChoice::Cpu,
            dtype,
        );
        if let Ok(mut model) = pollster::block_on(built) {
            let _ = pollster::block_on(model.predict(&[0, 1], 0));
            let _ = pollster::block_on(model.predict(&[0, 1, 2], 2));
        }
    }
}

/// Input: tokenizer.json. Parses it, encodes and decodes a text with every kind of character,
/// and streams the ids through the UTF-8-safe detokenizer.
pub fn load_tokenizer(data: &[u8]) {
    if let Ok(tok) = Tokenizer::from_bytes(data) {
        exercise(&tok);
    }
}

/// Encodes and decodes a text with every kind of character, and streams the ids (and ids out of
/// range) through the UTF-8-safe detokenizer.
fn exercise(tok: &Tokenizer) {
    let text = "Hello, world! ROMEO:\n\tÀ ß 東京 🙂 <|endoftext|> \u{0} \u{7f}";
    let Ok(ids) = tok.encode(text) else {
        return;
    };
    let _ = tok.decode(&ids);
    let mut detok = Detokenizer::default();
    for &id in ids.iter().chain(&[0, u32::MAX, tok.vocab_size() as u32]) {
        let _ = detok.push(tok.token_bytes(id));
    }
    let _ = detok.flush();
}

// The fast targets: a format's reader alone, no model built, so they run thousands of inputs a
// second where `load_model` runs tens.

/// `[u16 length][first][second]`, the two files of an input (a config and its weights, a
/// vocabulary and its merges).
pub fn two_files(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (head, rest) = data.split_first_chunk::<2>()?;
    let n = u16::from_le_bytes(*head) as usize;
    Some((rest.get(..n)?, rest.get(n..)?))
}

/// Streams `weights` as `file` for `config` in chunks of `size` bytes, every tensor widened to
/// f32 as it arrives, then ends the stream.
fn stream_weights(file: &str, config: &Config, weights: &[u8], size: usize) {
    let mut stream = crate::weights::stream::Stream::new(file, config);
    let mut widen = |_: &str, t: crate::weights::TensorRef| t.try_to_f32().map(drop);
    if weights
        .chunks(size.max(1))
        .all(|c| stream.push(c, &mut widen).is_ok())
    {
        let _ = stream.finish();
    }
}

/// A chunk size between 1 and 1021 bytes that varies with the input: each boundary case (a
/// header, a zip record, a pickle cut anywhere) is met across inputs, without the quadratic cost
/// of re-reading a growing header in 7-byte steps on every input.
fn chunk_size(data: &[u8]) -> usize {
    1 + data.len().wrapping_mul(7919) % 1021
}

/// Input: as `load_model` (config, then a `model.safetensors` or a `pytorch_model.bin`: the zip
/// records, the pickle, the storages; the reader is chosen by the bytes). The weights' reader
/// alone: the file streamed in one piece and in chunks (`chunk_size`; a pickle of unknown length
/// is parsed again as it grows), and a torch archive's pickle read whole.
pub fn weights_stream(data: &[u8]) {
    let Some((config, weights)) = two_files(data) else {
        return;
    };
    let Ok(config) = Config::from_json(config) else {
        return;
    };
    if Footprint::cpu(&config, CpuDtype::F32, weights.len() as u64)
        .map_or(true, |f| f.peak() > MAX_PEAK)
    {
        return;
    }
    stream_weights("model.safetensors", &config, weights, weights.len());
    stream_weights("model.safetensors", &config, weights, chunk_size(data));
    let _ = crate::weights::torch::pickle::state_dict("pytorch_model.bin", weights);
}

/// Input: a GGUF file. The header and tensor table read (and every prefix's scan: how many bytes
/// a header still needs), the config made from it, the tensors GPT-2 needs looked up, the
/// tokenizer built from its lists and run over a text; the file streamed in chunks (`chunk_size`).
pub fn gguf_header(data: &[u8]) {
    use crate::weights::gguf::{Gguf, Parsed};
    for end in [data.len() / 3, data.len() / 2, data.len()] {
        let _ = Gguf::parse("model.gguf", &data[..end]);
    }
    let Ok(Parsed::Header(g)) = Gguf::parse("model.gguf", data) else {
        return;
    };
    if let Ok(tok) = g.tokenizer() {
        exercise(&tok);
    }
    let Ok(config) = g.config_json() else {
        return;
    };
    let Ok(config) = Config::from_json(&config) else {
        return;
    };
    if g.header(&config).is_ok()
        && Footprint::cpu(&config, CpuDtype::F32, data.len() as u64)
            .is_ok_and(|f| f.peak() <= MAX_PEAK)
    {
        stream_weights("model.gguf", &config, data, chunk_size(data));
    }
}

/// Input: `[u16 length]` config.json, then `model.safetensors.index.json`. The shard index
/// parsed and checked against the config (names, paths, layers).
pub fn shard_index(data: &[u8]) {
    let Some((config, index)) = two_files(data) else {
        return;
    };
    if let Ok(config) = Config::from_json(config) {
        let _ = crate::weights::shards::Index::parse(index, &config);
    }
}

/// Input: `[u16 length]` vocab.json, then merges.txt. The tokenizer.json made from them, then
/// built and run as `load_tokenizer` does.
pub fn vocab_merges(data: &[u8]) {
    let Some((vocab, merges)) = two_files(data) else {
        return;
    };
    if let Ok(json) = crate::tokenizer::json_from_vocab_merges(vocab, merges) {
        load_tokenizer(&json);
    }
}
