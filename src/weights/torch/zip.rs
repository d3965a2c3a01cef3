//! The zip format's pieces that `torch.save` archives use, apart from the reader's state: the
//! signatures, a zip64 size, the end of a record of unknown length (its data descriptor) and
//! the end of the archive; and the sentence for a file that is not such an archive.

use crate::error::Error;

/// `file` is not a `torch.save` archive that can be read.
pub(super) fn bad(file: &str, why: impl std::fmt::Display) -> Error {
    Error::weights(
        file,
        format!("not a valid torch.save archive (truncated or corrupt?): {why}"),
    )
}

/// Whether `bytes` start like a zip archive (a `torch.save` file).
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04")
}

/// Whether `bytes` start like the legacy (pre-1.6) `torch.save` format: a pickle of its magic
/// number, 0x1950a86a20f9469cfc6c.
pub fn is_legacy(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46")
}

/// What a legacy file, `file`, is told.
pub fn legacy_error(file: &str) -> Error {
    Error::weights(
        file,
        "it is in torch's format from before version 1.6 (a bare pickle), which gpt2-web does \
         not read: save it again with a current torch (torch.save(torch.load(f), f)) or as \
         safetensors",
    )
}

/// The size a zip64 extra field gives (its compressed size, after the uncompressed one).
pub(super) fn zip64_size(extra: &[u8]) -> Option<u64> {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let id = u16::from_le_bytes([extra[at], extra[at + 1]]);
        let n = u16::from_le_bytes([extra[at + 2], extra[at + 3]]) as usize;
        let body = extra.get(at + 4..at + 4 + n)?;
        if id == 1 {
            let v = body.get(8..16).or_else(|| body.get(..8))?;
            return Some(u64::from_le_bytes(v.try_into().ok()?));
        }
        at += 4 + n;
    }
    None
}

/// Where a record of unknown length ends in `p` (its bytes, then more), with its data descriptor
/// (`PK\x07\x08`, the CRC, then sizes of 4 or, zip64, 8 bytes): the descriptor whose compressed
/// size equals the bytes before it. Only positions where one could end past `had` (what an
/// earlier call searched) are tried; a descriptor is at most 24 bytes long.
pub(super) fn record_end(p: &[u8], had: usize) -> Option<usize> {
    (had.saturating_sub(24)..p.len().saturating_sub(15)).find_map(|i| {
        let at = |j: usize, n: usize| -> Option<u64> {
            let s = p.get(i + j..i + j + n)?;
            Some(s.iter().rev().fold(0u64, |v, &b| (v << 8) | b as u64))
        };
        if &p[i..i + 4] != b"PK\x07\x08" {
            return None;
        }
        if at(8, 4) == Some(i as u64) {
            Some(i + 16)
        } else if at(8, 8) == Some(i as u64) {
            Some(i + 24)
        } else {
            None
        }
    })
}

/// Whether `p`, the last bytes of an archive, end with its end of central directory record: 22
/// bytes and a comment of at most 64 KiB.
pub(super) fn ends_with_directory(p: &[u8]) -> bool {
    (0..p.len().saturating_sub(21)).rev().any(|i| {
        p[i..].starts_with(b"PK\x05\x06")
            && i + 22 + u16::from_le_bytes([p[i + 20], p[i + 21]]) as usize == p.len()
    })
}
