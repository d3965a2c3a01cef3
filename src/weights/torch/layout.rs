//! Where each tensor GPT-2 needs lies in a `torch.save` archive's storages: the state dict's
//! views (`pickle`) checked against the config's tensor table (shape, dtype, contiguous or
//! transposed, inside its storage) and grouped by storage, for the zip reader to hand out.

use super::pickle::{StateDict, TensorView};
use super::zip::bad;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::weights::header::{check_layers, DiskDtype, Sink, TensorRef, PREFIX};
use crate::weights::table;
use std::collections::HashMap;

/// A tensor GPT-2 needs, placed in its storage.
#[derive(Clone, Debug)]
pub(super) struct Want {
    pub name: String,
    pub dtype: DiskDtype,
    pub shape: [usize; 2],
    pub transposed: bool,
    /// Byte range within the storage.
    pub start: usize,
    pub end: usize,
}

impl Want {
    /// The tensor, its storage's bytes being `storage`.
    pub fn view<'d>(&self, storage: &'d [u8]) -> Option<TensorRef<'d>> {
        Some(TensorRef {
            dtype: self.dtype,
            shape: self.shape,
            transposed: self.transposed,
            data: storage.get(self.start..self.end)?,
        })
    }
}

/// The placed tensors of a state dict.
pub(super) struct Layout {
    /// The tensors wanted, by storage key, in storage order.
    pub wants: HashMap<String, Vec<Want>>,
    /// Every storage's size in bytes (`None`: a storage type of unknown element size).
    pub storage_bytes: HashMap<String, Option<u64>>,
    /// How many tensors are wanted and not handed out yet.
    pub count: usize,
}

impl Layout {
    /// The state dict's tensors (of `file`) checked against the config and placed in their
    /// storages.
    pub fn of(file: &str, tensors: &StateDict, config: &Config) -> Result<Layout> {
        let storage_bytes = (tensors.iter())
            .map(|(_, t)| {
                let bytes =
                    storage_dtype(&t.storage_type).and_then(|(_, es)| t.numel.checked_mul(es));
                (t.key.clone(), bytes)
            })
            .collect();
        let by_name: HashMap<&str, &TensorView> =
            tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let prefix = if by_name.contains_key(table::WTE) {
            ""
        } else if by_name.contains_key(format!("{PREFIX}{}", table::WTE).as_str()) {
            PREFIX
        } else {
            return Err(Error::weights(
                file,
                format!("missing tensor \"wte.weight\" (also looked for \"{PREFIX}wte.weight\")"),
            ));
        };
        check_layers(file, by_name.keys().copied(), prefix, config)?;
        let mut wants: HashMap<String, Vec<Want>> = HashMap::new();
        let mut count = 0;
        for table::Spec { name, shape, .. } in table::tensors(config) {
            let full = format!("{prefix}{name}");
            let t = by_name
                .get(full.as_str())
                .ok_or_else(|| Error::weights(file, format!("missing tensor \"{full}\"")))?;
            let want = place(file, &full, name, shape, t)?;
            wants.entry(t.key.clone()).or_default().push(want);
            count += 1;
        }
        for w in wants.values_mut() {
            w.sort_by_key(|w| w.start);
        }
        Ok(Layout {
            wants,
            storage_bytes,
            count,
        })
    }

    /// The first tensor of storage `key`, if any is wanted from it.
    pub fn first_in(&self, key: &str) -> Option<&str> {
        Some(self.wants.get(key)?.first()?.name.as_str())
    }

    /// Hands out the tensors of storage `key` (of `file`), whose bytes `data` are all in.
    pub fn hand_out(&mut self, file: &str, key: &str, data: &[u8], sink: &mut Sink) -> Result<()> {
        for w in self.wants.remove(key).unwrap_or_default() {
            let t = w.view(data).ok_or_else(|| {
                bad(
                    file,
                    format!("tensor \"{}\" lies beyond its storage's bytes", w.name),
                )
            })?;
            sink(&w.name, t)?;
            self.count -= 1;
        }
        Ok(())
    }

    /// The first (by name) of the tensors not handed out yet.
    pub fn first_missing(&self) -> Option<&str> {
        let names = self.wants.values().flatten().map(|w| w.name.as_str());
        names.min()
    }
}

/// The disk type and element size of a torch storage type.
pub(super) fn storage_dtype(ty: &str) -> Option<(Option<DiskDtype>, u64)> {
    Some(match ty {
        "FloatStorage" => (Some(DiskDtype::F32), 4),
        "HalfStorage" => (Some(DiskDtype::F16), 2),
        "BFloat16Storage" => (Some(DiskDtype::BF16), 2),
        "DoubleStorage" | "LongStorage" => (None, 8),
        "IntStorage" => (None, 4),
        "ShortStorage" => (None, 2),
        "CharStorage" | "ByteStorage" | "BoolStorage" => (None, 1),
        _ => return None,
    })
}

/// Where tensor `full` lies in its storage, checked against the shape config.json implies: a
/// contiguous view, or a matrix stored transposed (a `.t()` saved as it was).
fn place(file: &str, full: &str, name: String, shape: [usize; 2], t: &TensorView) -> Result<Want> {
    let (dtype, es) = match storage_dtype(&t.storage_type) {
        Some((Some(d), es)) => (d, es),
        _ => {
            return Err(Error::weights(
                file,
                format!(
                    "tensor \"{full}\" is a {}; supported are float32, float16 and bfloat16",
                    t.storage_type
                ),
            ))
        }
    };
    let want: Vec<u64> = if shape[0] == 1 {
        vec![shape[1] as u64]
    } else {
        vec![shape[0] as u64, shape[1] as u64]
    };
    let ok_shape = t.shape == want || (shape[0] == 1 && t.shape == [1, shape[1] as u64]);
    if !ok_shape {
        return Err(Error::weights(
            file,
            format!(
                "tensor \"{full}\" has shape {:?}, expected {want:?} from config.json",
                t.shape
            ),
        ));
    }
    let [a, b] = [shape[0] as u64, shape[1] as u64];
    let transposed = if t.shape.len() == 1 {
        t.stride != [1]
    } else if t.shape.len() == 2 && (t.stride == [b, 1] || a == 1) {
        false
    } else if t.shape.len() == 2 && t.stride == [1, a] {
        true
    } else {
        return Err(Error::weights(
            file,
            format!(
                "tensor \"{full}\" is a strided view (stride {:?}); save contiguous tensors",
                t.stride
            ),
        ));
    };
    if t.shape.len() == 1 && transposed {
        return Err(Error::weights(
            file,
            format!(
                "tensor \"{full}\" is a strided view (stride {:?}); save contiguous tensors",
                t.stride
            ),
        ));
    }
    let n = a * b;
    let range = (t.offset.checked_mul(es))
        .zip((t.offset.checked_add(n)).and_then(|e| e.checked_mul(es)))
        .filter(|&(_, end)| t.numel.checked_mul(es).is_some_and(|s| end <= s));
    let Some((start, end)) = range else {
        return Err(bad(
            file,
            format!("tensor \"{full}\" lies beyond its storage"),
        ));
    };
    let conv = |x: u64| usize::try_from(x).map_err(|_| bad(file, "a tensor larger than memory"));
    Ok(Want {
        name,
        dtype,
        shape,
        transposed,
        start: conv(start)?,
        end: conv(end)?,
    })
}
