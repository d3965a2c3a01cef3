//! The GPT-2 tokenizer (byte-level BPE through the `tokenizers` crate) and a streaming
//! detokenizer whose deltas are always whole UTF-8 characters.
//!
//! Byte-level BPE maps every byte to a printable character (`bytes_to_unicode` in OpenAI's
//! `encoder.py`), so a token is a byte string, not a string: an emoji may span three tokens. The
//! detokenizer holds back an incomplete UTF-8 sequence until the token that completes it arrives,
//! and decodes invalid bytes exactly as `String::from_utf8_lossy` (and so transformers) would.

use crate::error::{Error, Result};

mod bpe;

/// A tokenizer plus each token's raw bytes.
pub struct Tokenizer {
    inner: Inner,
    /// Each token's raw bytes, by id.
    token_bytes: Pieces,
}

/// Byte strings by index, end to end in one buffer (one allocation for 50,257 tokens, not one each).
#[derive(Default)]
struct Pieces {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Pieces {
    fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)? as usize;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p] as usize);
        Some(&self.bytes[start..end])
    }

    /// Ends the piece being written (the bytes pushed since the last one).
    fn end(&mut self) {
        self.ends.push(self.bytes.len() as u32);
    }
}

/// A `tokenizer.json` as the `tokenizers` crate reads it, or GPT-2's byte-level BPE from a
/// vocabulary's lists (`bpe::Gpt2Bpe` behind the same pre-tokenizer and added tokens).
enum Inner {
    Json(Box<tokenizers::Tokenizer>),
    Lists(
        Box<
            tokenizers::TokenizerImpl<
                bpe::Gpt2Bpe,
                tokenizers::NormalizerWrapper,
                tokenizers::PreTokenizerWrapper,
                tokenizers::PostProcessorWrapper,
                tokenizers::DecoderWrapper,
            >,
        >,
    ),
}

impl Tokenizer {
    /// Parses `tokenizer.json` bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        screen(bytes)?;
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| Error::tokenizer(format!("cannot parse: {e}")))?;
        let vocab = inner.get_vocab(true);
        // In u64: an id of u32::MAX plus one wraps a 32-bit usize (wasm32).
        let n = vocab.values().map(|&id| id as u64 + 1).max().unwrap_or(0);
        if n > crate::config::MAX_DIM as u64 {
            return Err(Error::tokenizer(format!(
                "token id {} is larger than any GPT-2 vocabulary (at most {} ids)",
                n - 1,
                crate::config::MAX_DIM
            )));
        }
        let n = n as usize;
        let byte_of = unicode_to_byte();
        let mut token_bytes = vec![Vec::new(); n];
        let added = inner.get_added_tokens_decoder();
        for (token, &id) in &vocab {
            let bytes = if let Some(a) = added.get(&id) {
                a.content.as_bytes().to_vec()
            } else if let Some(b) = token.chars().map(&byte_of).collect::<Option<Vec<u8>>>() {
                b
            } else {
                // Not byte-level: fall back to the tokenizer's own decoder for this token.
                inner
                    .decode(&[id], false)
                    .map_err(|e| Error::tokenizer(format!("cannot decode token {id}: {e}")))?
                    .into_bytes()
            };
            token_bytes[id as usize] = bytes;
        }
        let mut pieces = Pieces::default();
        for b in &token_bytes {
            pieces.bytes.extend_from_slice(b);
            pieces.end();
        }
        Ok(Tokenizer {
            inner: Inner::Json(Box::new(inner)),
            token_bytes: pieces,
        })
    }

    /// GPT-2's byte-level BPE from its token strings by id, its merges (`"a b"`) and its added
    /// tokens (id, text, special): the tokenizer `byte_level_json` describes, built directly, with
    /// no JSON written or parsed (a GGUF file's `tokenizer.ggml.*`, read on every return visit).
    /// Its errors name `file`, the file the lists come from.
    pub fn from_lists(
        file: &str,
        tokens: &[&str],
        merges: &[&str],
        added: &[(u32, &str, bool)],
    ) -> Result<Self> {
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;
        let bad = |msg: String| Error::Tokenizer {
            file: file.to_string(),
            msg,
        };
        if tokens.len() > crate::config::MAX_DIM {
            return Err(bad(format!(
                "{} tokens, more than any GPT-2 vocabulary (at most {} ids)",
                tokens.len(),
                crate::config::MAX_DIM
            )));
        }
        let longest = tokens.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut pairs = Vec::with_capacity(merges.len());
        for m in merges {
            let Some((a, b)) = m.split_once(' ') else {
                return Err(bad(format!("merge \"{m}\" is not two tokens")));
            };
            // As screen_merges for a tokenizer.json.
            if a.len() + b.len() > longest {
                return Err(bad(format!(
                    "merge \"{m}\" makes a token longer than any in the vocabulary"
                )));
            }
            pairs.push((a, b));
        }
        let model =
            bpe::Gpt2Bpe::new(tokens, &pairs).map_err(|e| bad(format!("cannot build: {e}")))?;
        let mut inner = tokenizers::TokenizerImpl::new(model);
        inner
            .with_pre_tokenizer(Some(ByteLevel::new(false, true, true)))
            .with_post_processor(Some(ByteLevel::new(true, false, true)))
            .with_decoder(Some(ByteLevel::new(true, true, true)));
        for &(_, content, special) in added {
            let t = tokenizers::AddedToken::from(content.to_string(), special).normalized(true);
            let added = if special {
                inner.add_special_tokens([t])
            } else {
                inner.add_tokens([t])
            };
            added.map_err(|e| bad(format!("added token {content:?}: {e}")))?;
        }
        let byte_of = unicode_to_byte();
        let added_text: std::collections::HashMap<u32, &str> = added
            .iter()
            .map(|&(id, content, _)| (id, content))
            .collect();
        let mut token_bytes = Pieces::default();
        token_bytes
            .bytes
            .reserve(tokens.iter().map(|t| t.len()).sum());
        for (id, t) in tokens.iter().enumerate() {
            let start = token_bytes.bytes.len();
            if let Some(content) = added_text.get(&(id as u32)) {
                token_bytes.bytes.extend_from_slice(content.as_bytes());
            } else {
                for c in t.chars() {
                    let Some(b) = byte_of(c) else {
                        // Not byte-level: the token's own text.
                        token_bytes.bytes.truncate(start);
                        token_bytes.bytes.extend_from_slice(t.as_bytes());
                        break;
                    };
                    token_bytes.bytes.push(b);
                }
            }
            token_bytes.end();
        }
        Ok(Tokenizer {
            inner: Inner::Lists(Box::new(inner)),
            token_bytes,
        })
    }

    /// Token ids of `text`; special tokens such as `<|endoftext|>` written in the text are recognised.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = match &self.inner {
            Inner::Json(t) => t.encode(text, false),
            Inner::Lists(t) => t.encode(text, false),
        }
        .map_err(|e| Error::tokenizer(format!("cannot encode: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The raw bytes of one token (empty for an id the tokenizer does not know).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.token_bytes.get(id as usize).unwrap_or(&[])
    }

    /// Text of `ids`, invalid UTF-8 replaced by U+FFFD (as transformers' `decode`).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| self.token_bytes(id))
            .copied()
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Number of token ids the tokenizer knows.
    pub fn vocab_size(&self) -> usize {
        self.token_bytes.ends.len()
    }
}

/// GPT-2's `tokenizer.json` (byte-level BPE, as openai-community/gpt2's) for a vocabulary given
/// as its token strings by id, its merges (`"a b"`), and its added tokens (id, text, special):
/// what a GGUF file's `tokenizer.ggml.*` or a `vocab.json` + `merges.txt` pair amount to.
pub fn byte_level_json(tokens: &[&str], merges: &[&str], added: &[(u32, &str, bool)]) -> Vec<u8> {
    let vocab: serde_json::Map<String, serde_json::Value> = (tokens.iter().enumerate())
        .map(|(id, t)| (t.to_string(), serde_json::json!(id)))
        .collect();
    let added: Vec<serde_json::Value> = (added.iter())
        .map(|&(id, content, special)| {
            serde_json::json!({
                "id": id, "content": content, "single_word": false, "lstrip": false,
                "rstrip": false, "normalized": true, "special": special,
            })
        })
        .collect();
    let byte_level = |add_prefix_space: bool, trim_offsets: bool| {
        serde_json::json!({
            "type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": true,
        })
    };
    let json = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": byte_level(false, true),
        "post_processor": byte_level(true, false),
        "decoder": byte_level(true, true),
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    });
    serde_json::to_vec(&json).expect("JSON")
}

/// `tokenizer.json` from the older pair of files some GPT-2 repositories have instead: `vocab.json`
/// (`{token: id}`) and `merges.txt` (a `#version` line, then one merge `a b` per line).
/// `<|endoftext|>`, when the vocabulary has it, is the special token, as in GPT-2's own files.
pub fn json_from_vocab_merges(vocab_json: &[u8], merges_txt: &[u8]) -> Result<Vec<u8>> {
    let vocab: std::collections::HashMap<String, u64> = serde_json::from_slice(vocab_json)
        .map_err(|e| Error::tokenizer(format!("vocab.json is not a map of tokens to ids: {e}")))?;
    let n = vocab.values().map(|&id| id + 1).max().unwrap_or(0);
    if n > crate::config::MAX_DIM as u64 || n > vocab.len() as u64 * 2 + 1024 {
        return Err(Error::tokenizer(format!(
            "vocab.json has an id of {} for {} tokens; ids must count up from 0",
            n.saturating_sub(1),
            vocab.len()
        )));
    }
    let mut tokens = vec![""; n as usize];
    for (t, &id) in &vocab {
        tokens[id as usize] = t;
    }
    let merges =
        std::str::from_utf8(merges_txt).map_err(|_| Error::tokenizer("merges.txt is not UTF-8"))?;
    let merges: Vec<&str> = (merges.lines())
        .filter(|l| !l.starts_with("#version") && !l.trim().is_empty())
        .collect();
    if let Some(bad) = merges.iter().find(|m| m.split(' ').count() != 2) {
        return Err(Error::tokenizer(format!(
            "merges.txt: the line {bad:?} is not two tokens separated by a space"
        )));
    }
    let added: Vec<(u32, &str, bool)> = (vocab.get("<|endoftext|>"))
        .map(|&id| (id as u32, "<|endoftext|>", true))
        .into_iter()
        .collect();
    Ok(byte_level_json(&tokens, &merges, &added))
}

/// What the `tokenizers` crate would panic on rather than return an error for (a panic aborts
/// the whole wasm instance): malformed JSON inside a component (its decoder deserialization
/// `expect`s; found by the load_tokenizer fuzzer) and the SentencePiece `Precompiled` normalizer,
/// whose char map is `expect`ed to parse. GPT-2 uses neither.
fn screen(bytes: &[u8]) -> Result<()> {
    let json: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::tokenizer(format!("not valid JSON: {e}")))?;
    fn precompiled(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(m) => {
                m.get("type").and_then(|t| t.as_str()) == Some("Precompiled")
                    || m.values().any(precompiled)
            }
            serde_json::Value::Array(a) => a.iter().any(precompiled),
            _ => false,
        }
    }
    if json.get("normalizer").is_some_and(precompiled) {
        return Err(Error::tokenizer(
            "the Precompiled (SentencePiece) normalizer is not supported; GPT-2's tokenizer has none",
        ));
    }
    screen_merges(&json["model"])
}

/// A BPE merge `a b` is built by concatenating `a` and `b` without the continuing-subword prefix
/// into a buffer as long as the longest token; the crate indexes that buffer unchecked, so a merge
/// whose `b` is shorter than the prefix, or whose result is longer than any token, panics (found
/// by the load_tokenizer fuzzer). Such a merge cannot name a token anyway: refuse it.
fn screen_merges(model: &serde_json::Value) -> Result<()> {
    let (Some(vocab), Some(merges)) = (
        model.get("vocab").and_then(|v| v.as_object()),
        model.get("merges").and_then(|m| m.as_array()),
    ) else {
        return Ok(()); // not BPE, or malformed: the crate returns its own error
    };
    let prefix = model
        .get("continuing_subword_prefix")
        .and_then(|p| p.as_str())
        .map_or(0, str::len);
    let longest = vocab.keys().map(String::len).max().unwrap_or(0);
    for merge in merges {
        let pair = match merge {
            serde_json::Value::String(s) => s.split_once(' '),
            serde_json::Value::Array(a) => match (a.first(), a.get(1)) {
                (Some(serde_json::Value::String(x)), Some(serde_json::Value::String(y))) => {
                    Some((x.as_str(), y.as_str()))
                }
                _ => None,
            },
            _ => None,
        };
        let Some((a, b)) = pair else { continue };
        if b.len() < prefix || a.len() + b.len() - prefix > longest {
            return Err(Error::tokenizer(format!(
                "the merge {merge} cannot make a token of the vocabulary"
            )));
        }
    }
    Ok(())
}

/// The inverse of GPT-2's `bytes_to_unicode`: printable Latin-1 bytes stand for themselves,
/// the other 68 bytes are shifted to U+0100.. in order.
fn unicode_to_byte() -> impl Fn(char) -> Option<u8> {
    let mut table = [None; 512];
    let mut shifted = 0u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let ch = if printable {
            b as u32
        } else {
            shifted += 1;
            255 + shifted
        };
        table[ch as usize] = Some(b);
    }
    move |ch: char| table.get(ch as usize).copied().flatten()
}

/// Turns a stream of token bytes into text deltas that are always valid UTF-8 and whose
/// concatenation equals `String::from_utf8_lossy` of all the bytes.
#[derive(Default, Debug)]
pub struct Detokenizer {
    pending: Vec<u8>,
}

impl Detokenizer {
    /// Adds one token's bytes; returns the text that is now complete (may be empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = start + e.valid_up_to();
                    // valid_up_to bytes were just checked to be UTF-8.
                    out.push_str(
                        std::str::from_utf8(&self.pending[start..valid]).unwrap_or_default(),
                    );
                    match e.error_len() {
                        // Invalid sequence: one replacement character, as from_utf8_lossy does.
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start = valid + n;
                        }
                        // Incomplete sequence at the end: wait for the next token.
                        None => {
                            start = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        out
    }

    /// Ends the stream: bytes of an unfinished character become U+FFFD.
    pub fn flush(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_inverts_gpt2_bytes_to_unicode() {
        let f = unicode_to_byte();
        assert_eq!(f('!'), Some(b'!'));
        assert_eq!(f('Ġ'), Some(b' ')); // U+0120 is the space byte in GPT-2's vocabulary
        assert_eq!(f('Ċ'), Some(b'\n'));
        assert_eq!(f('Ā'), Some(0));
        assert_eq!(f('a'), Some(b'a'));
        assert_eq!(f('€'), None);
    }

    #[test]
    fn split_emoji_arrives_once_whole() {
        let bytes = "a😀b".as_bytes(); // 😀 is F0 9F 98 80
        let mut d = Detokenizer::default();
        let pieces = [&bytes[..2], &bytes[2..3], &bytes[3..5], &bytes[5..]];
        let deltas: Vec<String> = pieces.iter().map(|p| d.push(p)).collect();
        assert_eq!(deltas, ["a", "", "😀", "b"]);
        assert_eq!(d.flush(), "");
    }

    #[test]
    fn invalid_bytes_match_from_utf8_lossy() {
        let streams: [&[u8]; 4] = [
            b"\xff\xfeab",
            b"a\xe2\x82",
            b"\xe2\x28\xa1x",
            b"\xf0\x9f\x98\x80\x80",
        ];
        for s in streams {
            for split in 0..=s.len() {
                let mut d = Detokenizer::default();
                let mut text = d.push(&s[..split]);
                text += &d.push(&s[split..]);
                text += &d.flush();
                assert_eq!(
                    text,
                    String::from_utf8_lossy(s),
                    "stream {s:?} split at {split}"
                );
            }
        }
    }
}
