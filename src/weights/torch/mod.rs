//! `pytorch_model.bin`: the zip archive `torch.save` writes (since torch 1.6), read as a stream
//! without running anything. Its entries come in order: `<name>/data.pkl` (the state dict as a
//! pickle: each tensor a view of a storage, `pickle`), a few small records, then each storage's
//! bytes as `<name>/data/<key>`, then the central directory. torch writes every entry stored
//! (uncompressed) with its sizes left out of the local header and given in a data descriptor
//! after the data, so the reader learns the pickle's length from its STOP, a storage's from the
//! pickle, and a small record's from the descriptor that ends it. Each tensor GPT-2 needs is
//! handed to the sink once its storage's bytes are in (a storage that a chunk holds whole is read
//! in place, one split across chunks is gathered in a buffer of its size).
//!
//! The older format (before torch 1.6: a bare pickle, tensors after it) is refused with a
//! sentence: re-save it with a current torch, or as safetensors.
//!
//! The parts, each file using only those listed after it: `reader` (the archive's entries in
//! order), `layout` (where each tensor lies in its storage), `zip` (the format's pieces), and
//! `pickle` (`data.pkl`, read without running it).

mod layout;
pub mod pickle;
mod reader;
mod zip;

pub use reader::TorchReader;
pub use zip::{is_legacy, is_zip, legacy_error};
