//! What a forward pass is asked, the one surface of every backend: rows in — each sequence's new
//! ids, their positions and the KV cache slot they belong to — and logits out.

/// One sequence's part of a forward pass: its new `ids`, placed at positions `pos..` and written
/// into KV cache slot `slot` (`Backend::kv_slots`), attending to the `pos` positions the slot
/// holds before them.
#[derive(Clone, Copy, Debug)]
pub struct Seq<'a> {
    pub slot: usize,
    pub ids: &'a [u32],
    pub pos: usize,
}

/// Which rows of a pass give logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// The last row of each sequence: (sequences, vocab_size), in the order given.
    Last,
    /// Speculative decoding's verification pass, over one sequence of at most `MAX_VERIFY` ids:
    /// every row through ln_f (its hidden state kept), and the logits of (at least) the first
    /// `n` rows, row after row; `Backend::more_logits` gives the others'.
    Every(usize),
    /// Greedy's choice and nothing else: the index of the largest logit of each sequence's last
    /// row (the first of equal ones, as `sampling::argmax` scans), in `Backend::chosen`; the
    /// pass returns no logits. On the GPU it is chosen there, and a step reads back 4 bytes per
    /// sequence instead of a vocabulary's logits.
    Argmax,
    /// `Argmax`, from a caller that will most likely ask next for the same sequences, each one
    /// position on with its argmax as its id (or for some of them, the others having stopped):
    /// the GPU submits that pass before reading this one back (`gpu/ahead.rs`), with the same
    /// results; the CPU takes it as `Argmax`.
    ArgmaxAhead,
    /// Sampling's candidates and nothing else: the `k` (1 ..= `MAX_TOP_K`) largest logits of
    /// each sequence's last row with their ids (of equal ones at the k-th, the smaller ids:
    /// `sampling::top_k`), in `Backend::top`, k per sequence in the order given, unsorted; the
    /// pass returns no logits. On the GPU they are chosen there, and a step reads back 8·k bytes
    /// per sequence.
    Top(usize),
}

/// The most candidates `Want::Top` asks for (the GPU's top_k.wgsl keeps this many per row).
pub const MAX_TOP_K: usize = 256;
