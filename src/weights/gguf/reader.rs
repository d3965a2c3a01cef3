//! The bytes of a GGUF header read one field at a time: running out is `Fail::Short` (how many
//! bytes are needed), a value that cannot be is `Fail::Bad`, with the limits that keep a crafted
//! header from taking more memory than its own size would.

use crate::error::Error;

/// The most header bytes accepted (safetensors' limit too): GPT-2's vocabulary and merges take ~2 MB.
pub const MAX_HEADER: usize = 100_000_000;
/// The most array elements in all the metadata together (GPT-2 has ~150,000: its tokens, their
/// types and its merges; the largest vocabularies have ~256,000 tokens): each takes more memory
/// parsed than its one byte in the file, so a crafted header must not multiply it unchecked.
const MAX_ELEMENTS: u64 = 1 << 22;

/// `file` is not a GGUF file that can be read.
pub fn invalid(file: &str, why: impl std::fmt::Display) -> Error {
    Error::weights(
        file,
        format!("not a valid GGUF file (truncated or corrupt?): {why}"),
    )
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i128),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Value>),
    /// An array of strings (a tokenizer's 50,257 tokens and 50,000 merges), end to end in one
    /// buffer instead of a `String` each.
    Strs(Strs),
}

/// Strings end to end: `text`, and where each ends in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Strs {
    text: String,
    ends: Vec<u32>,
}

impl Strs {
    /// The strings in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .map(|(a, &b)| &self.text[a as usize..b as usize])
    }
}

/// A reader over the header's bytes; running out is `Err(Short(n))`: `n` bytes are needed.
pub(super) struct Reader<'a> {
    /// The file, as errors name it.
    pub file: &'a str,
    pub bytes: &'a [u8],
    pub at: usize,
    /// Array elements read so far.
    pub elements: u64,
    /// False for a scan: strings are skipped (returned empty) and arrays keep no elements, so
    /// walking a header that is still arriving allocates nothing.
    pub keep: bool,
    /// False: the metadata's arrays are walked as a scan walks them and kept empty (the
    /// weights' stream needs the tensor table and the scalars, not a vocabulary of 50,257
    /// tokens and its 50,000 merges).
    pub arrays: bool,
}

pub(super) enum Fail {
    Short(usize),
    Bad(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Bad(e)
    }
}

pub(super) type R<T> = std::result::Result<T, Fail>;

impl<'a> Reader<'a> {
    pub(super) fn new(file: &'a str, bytes: &'a [u8], keep: bool, arrays: bool) -> Self {
        Reader {
            file,
            bytes,
            at: 0,
            elements: 0,
            keep,
            arrays,
        }
    }

    /// A value that cannot be.
    pub(super) fn bad(&self, why: impl std::fmt::Display) -> Fail {
        Fail::Bad(invalid(self.file, why))
    }

    pub(super) fn take(&mut self, n: u64) -> R<&'a [u8]> {
        let end = (self.at as u64).saturating_add(n);
        if end > MAX_HEADER as u64 {
            return Err(self.bad(format!(
                "its header would be longer than {MAX_HEADER} bytes (a length of {n} at byte {})",
                self.at
            )));
        }
        let end = end as usize;
        if end > self.bytes.len() {
            return Err(Fail::Short(end));
        }
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    pub(super) fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }

    pub(super) fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }

    pub(super) fn string(&mut self) -> R<String> {
        Ok(self.str()?.unwrap_or_default().to_string())
    }

    /// The next string, checked to be UTF-8, or None in a scan (its bytes skipped unchecked).
    fn str(&mut self) -> R<Option<&'a str>> {
        let n = self.u64()?;
        let at = self.at;
        let b = self.take(n)?;
        if !self.keep {
            return Ok(None);
        }
        let s = std::str::from_utf8(b)
            .map_err(|_| self.bad(format!("the string at byte {at} is not UTF-8")))?;
        Ok(Some(s))
    }

    pub(super) fn value(&mut self, ty: u32, depth: usize) -> R<Value> {
        Ok(match ty {
            0 => Value::Int(self.take(1)?[0] as i128),
            1 => Value::Int(self.take(1)?[0] as i8 as i128),
            2 => Value::Int(u16::from_le_bytes(self.take(2)?.try_into().expect("2")) as i128),
            3 => Value::Int(i16::from_le_bytes(self.take(2)?.try_into().expect("2")) as i128),
            4 => Value::Int(u32::from_le_bytes(self.take(4)?.try_into().expect("4")) as i128),
            5 => Value::Int(i32::from_le_bytes(self.take(4)?.try_into().expect("4")) as i128),
            6 => Value::Float(f32::from_le_bytes(self.take(4)?.try_into().expect("4")) as f64),
            7 => Value::Bool(self.take(1)?[0] != 0),
            8 => Value::Str(self.string()?),
            9 => {
                if depth > 0 {
                    return Err(self.bad("an array of arrays in the metadata"));
                }
                let (ty, n) = (self.u32()?, self.u64()?);
                self.elements = self.elements.saturating_add(n);
                if self.elements > MAX_ELEMENTS {
                    return Err(self.bad(format!(
                        "its metadata has arrays of more than {MAX_ELEMENTS} elements in all \
                         (one of {n})"
                    )));
                }
                let kept = self.keep && self.arrays;
                let keep = std::mem::replace(&mut self.keep, kept);
                let items = self.array(ty, n, depth);
                self.keep = keep;
                return items;
            }
            10 => Value::Int(u64::from_le_bytes(self.take(8)?.try_into().expect("8")) as i128),
            11 => Value::Int(i64::from_le_bytes(self.take(8)?.try_into().expect("8")) as i128),
            12 => Value::Float(f64::from_le_bytes(self.take(8)?.try_into().expect("8"))),
            other => return Err(self.bad(format!("metadata value type {other} (known: 0..=12)"))),
        })
    }

    /// The `n` elements of type `ty` of an array, kept when `keep` says.
    fn array(&mut self, ty: u32, n: u64, depth: usize) -> R<Value> {
        if ty == 8 {
            let mut strs = Strs::default();
            for _ in 0..n {
                if let Some(s) = self.str()? {
                    strs.text.push_str(s);
                    strs.ends.push(strs.text.len() as u32);
                }
            }
            return Ok(Value::Strs(strs));
        }
        let mut items = Vec::new();
        for _ in 0..n {
            let item = self.value(ty, depth + 1)?;
            if self.keep {
                items.push(item);
            }
        }
        Ok(Value::Array(items))
    }
}
