//! GPT-2's byte-level BPE as a `tokenizers` model, built from a vocabulary's token strings and its
//! merges in two flat tables instead of `tokenizers`' own BPE (a `String` and two map entries per
//! token, a formatted string per merge). It is what a GGUF file's lists become on every load, a
//! return visit's included: on a 2-core AMD EPYC, `Tokenizer::from_lists` over GPT-2's 50,257
//! tokens and 50,000 merges took 24–44 ms natively with the crate's builder and takes 11 ms with
//! this one. The tokens come out the same (`merge_all` is the crate's algorithm: the lowest-ranked
//! pair first, the leftmost of equals): tests/gguf.rs holds it to tiktoken's ids and to the
//! crate's on thousands of strings.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};

use tokenizers::{Model, Token};

/// The vocabulary and merges of one tokenizer.
pub(super) struct Gpt2Bpe {
    /// Every token's string, in id order, end to end.
    text: String,
    /// `ends[id]`: where token `id`'s string ends in `text` (it starts at `ends[id - 1]`).
    ends: Vec<u32>,
    /// An open-addressing table of token strings: `id + 1` per slot (0: empty), linear probing,
    /// a power of two at least twice the tokens.
    slots: Vec<u32>,
    /// Distinct token strings (a string given twice keeps its last id, as a JSON vocabulary would).
    distinct: usize,
    /// (left id, right id) → (rank, merged id).
    merges: HashMap<u64, (u32, u32), BuildHasherDefault<PairHasher>>,
}

/// The merges' keys are two ids in a u64: one multiplication spreads them.
#[derive(Default)]
pub(super) struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 ^= hash_str(bytes);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// FNV-1a over a token's bytes (a few bytes each), folded so the low bits the table uses mix.
fn hash_str(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ (h >> 29)
}

impl Gpt2Bpe {
    /// The model of `tokens` (by id) and `merges` (`(left, right)` by rank). A merge whose parts
    /// or result are not tokens is an error naming it (as the crate's builder refuses it).
    pub(super) fn new(tokens: &[&str], merges: &[(&str, &str)]) -> Result<Self, String> {
        let mut text = String::with_capacity(tokens.iter().map(|t| t.len()).sum());
        let mut ends = Vec::with_capacity(tokens.len());
        for t in tokens {
            text.push_str(t);
            ends.push(text.len() as u32);
        }
        let mut bpe = Gpt2Bpe {
            text,
            ends,
            slots: vec![0; (2 * tokens.len()).next_power_of_two().max(2)],
            distinct: 0,
            merges: HashMap::with_capacity_and_hasher(merges.len(), Default::default()),
        };
        for id in 0..tokens.len() as u32 {
            bpe.insert(id);
        }
        let mut joined = String::new();
        for (rank, &(a, b)) in merges.iter().enumerate() {
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            let id = |s: &str| {
                bpe.id(s)
                    .ok_or_else(|| format!("merge \"{a} {b}\": \"{s}\" is not a token"))
            };
            let key = pair(id(a)?, id(b)?);
            let merged = id(&joined)?;
            bpe.merges.insert(key, (rank as u32, merged));
        }
        Ok(bpe)
    }

    fn token(&self, id: u32) -> &str {
        let end = self.ends[id as usize] as usize;
        let start = if id == 0 {
            0
        } else {
            self.ends[id as usize - 1] as usize
        };
        &self.text[start..end]
    }

    /// The slot where `s` is, or the empty one where it would go.
    fn slot(&self, s: &str) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = hash_str(s.as_bytes()) as usize & mask;
        loop {
            let held = self.slots[at];
            if held == 0 || self.token(held - 1) == s {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    fn insert(&mut self, id: u32) {
        let at = self.slot(self.token(id));
        if self.slots[at] == 0 {
            self.distinct += 1;
        }
        self.slots[at] = id + 1;
    }

    fn id(&self, s: &str) -> Option<u32> {
        self.slots[self.slot(s)].checked_sub(1)
    }

    /// The ids of one pre-token's characters, merged pair by pair, with each one's byte length.
    fn merge_all(&self, word: &str) -> Vec<(u32, usize)> {
        /// A symbol of the word: its id, byte length (0 once merged into its left neighbour), and
        /// its neighbours' positions.
        #[derive(Clone, Copy)]
        struct Symbol {
            id: u32,
            len: usize,
            prev: Option<usize>,
            next: Option<usize>,
        }
        let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
        let mut buf = [0u8; 4];
        for c in word.chars() {
            // A character that is no token is dropped, as the crate's BPE without an unknown token does.
            let Some(id) = self.id(c.encode_utf8(&mut buf)) else {
                continue;
            };
            let at = symbols.len();
            if let Some(last) = symbols.last_mut() {
                last.next = Some(at);
            }
            symbols.push(Symbol {
                id,
                len: c.len_utf8(),
                prev: at.checked_sub(1),
                next: None,
            });
        }
        let merge_of = |a: u32, b: u32| self.merges.get(&pair(a, b)).copied();
        // Lowest rank first, then leftmost: (rank, position, merged id).
        let mut queue: BinaryHeap<Reverse<(u32, usize, u32)>> = (symbols.windows(2).enumerate())
            .filter_map(|(pos, w)| {
                merge_of(w[0].id, w[1].id).map(|(rank, id)| Reverse((rank, pos, id)))
            })
            .collect();
        while let Some(Reverse((_, pos, new_id))) = queue.pop() {
            let left = symbols[pos];
            let Some(next) = left.next else { continue };
            // An entry whose symbols have changed since it was queued is stale.
            if left.len == 0 || merge_of(left.id, symbols[next].id).map(|m| m.1) != Some(new_id) {
                continue;
            }
            let right = symbols[next];
            symbols[pos] = Symbol {
                id: new_id,
                len: left.len + right.len,
                ..left
            };
            symbols[pos].next = right.next;
            symbols[next].len = 0;
            if let Some(after) = right.next {
                symbols[after].prev = Some(pos);
            }
            if let Some(before) = left.prev {
                if let Some((rank, id)) = merge_of(symbols[before].id, new_id) {
                    queue.push(Reverse((rank, before, id)));
                }
            }
            if let Some(after) = right.next {
                if let Some((rank, id)) = merge_of(new_id, symbols[after].id) {
                    queue.push(Reverse((rank, pos, id)));
                }
            }
        }
        symbols
            .iter()
            .filter(|s| s.len > 0)
            .map(|s| (s.id, s.len))
            .collect()
    }
}

fn pair(a: u32, b: u32) -> u64 {
    (a as u64) << 32 | b as u64
}

impl Model for Gpt2Bpe {
    type Trainer = tokenizers::models::bpe::BpeTrainer;

    fn tokenize(&self, sequence: &str) -> tokenizers::Result<Vec<Token>> {
        let mut at = 0;
        Ok((self.merge_all(sequence).into_iter())
            .map(|(id, len)| {
                at += len;
                Token::new(id, self.token(id).to_string(), (at - len, at))
            })
            .collect())
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.id(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        ((id as usize) < self.ends.len()).then(|| self.token(id).to_string())
    }

    fn get_vocab(&self) -> std::collections::HashMap<String, u32> {
        (self.slots.iter().filter_map(|&s| s.checked_sub(1)))
            .map(|id| (self.token(id).to_string(), id))
            .collect()
    }

    fn get_vocab_size(&self) -> usize {
        self.distinct
    }

    fn save(&self, _folder: &Path, _prefix: Option<&str>) -> tokenizers::Result<Vec<PathBuf>> {
        Err("a GPT-2 tokenizer built from a GGUF file's lists is not saved".into())
    }

    fn get_trainer(&self) -> Self::Trainer {
        Default::default()
    }
}
