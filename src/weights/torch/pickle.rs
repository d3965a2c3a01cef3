//! A restricted reader of the pickle that `torch.save` writes for a state dict (`data.pkl`):
//! nothing is ever run. It knows the opcodes of protocols 2 to 4 that such a file uses, and three
//! callables by name — `collections.OrderedDict`, `torch._utils._rebuild_tensor_v2` and
//! `_rebuild_parameter` — which it evaluates itself; any other global is refused with a sentence
//! naming it (a pickle that names `os.system` is an attack, not a checkpoint).
//!
//! The opcodes: https://github.com/python/cpython/blob/main/Lib/pickletools.py.

use crate::error::Error;

/// Why `data.pkl` cannot be read, as a sentence: `state_dict` names the file it is in.
struct Bad(String);

type Result<T> = std::result::Result<T, Bad>;

/// The most items the memo and the stack may hold (a GPT-2 XL state dict needs ~10 000).
const MAX_ITEMS: usize = 1 << 22;

/// A state dict's tensors by name, in the pickle's order.
pub type StateDict = Vec<(String, TensorView)>;

/// A tensor as the pickle describes it: a view of a storage.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorView {
    /// The storage's type, e.g. `FloatStorage`.
    pub storage_type: String,
    /// Its key: the archive holds its bytes as `data/<key>`.
    pub key: String,
    /// Elements the storage holds.
    pub numel: u64,
    /// Where the view starts, in elements.
    pub offset: u64,
    pub shape: Vec<u64>,
    pub stride: Vec<u64>,
}

#[derive(Clone, Debug)]
enum Value {
    None,
    Bool,
    Int(i64),
    Float,
    Str(String),
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// A callable by name (`global` lets only a few through).
    Global(String),
    /// A persistent id: `('storage', <type>, key, location, numel)`.
    Storage(String, String, u64),
    Tensor(TensorView),
    Mark,
}

fn bad(why: impl std::fmt::Display) -> Bad {
    Bad(format!(
        "not a valid torch.save archive (truncated or corrupt?): data.pkl: {why}"
    ))
}

/// The state dict of `data.pkl`'s bytes (in `file`, which its errors name): its tensors by name
/// (other entries are left out), and how many bytes the pickle took (it ends at STOP).
/// `Ok(None)` while `bytes` ends before STOP.
pub fn state_dict(file: &str, bytes: &[u8]) -> crate::error::Result<Option<(StateDict, usize)>> {
    read(bytes).map_err(|Bad(msg)| Error::weights(file, msg))
}

fn read(bytes: &[u8]) -> Result<Option<(StateDict, usize)>> {
    let mut r = Reader {
        bytes,
        at: 0,
        stack: Vec::new(),
        memo: std::collections::HashMap::new(),
    };
    let top = match r.run() {
        Ok(v) => v,
        Err(Run::More) => return Ok(None),
        Err(Run::Bad(e)) => return Err(e),
    };
    let Value::Dict(items) = top else {
        return Err(bad(
            "it holds no dict of tensors (a whole pickled model? save its state_dict())",
        ));
    };
    let mut out = Vec::new();
    for (k, v) in items {
        if let (Value::Str(name), Value::Tensor(t)) = (k, v) {
            out.push((name, t));
        }
    }
    Ok(Some((out, r.at)))
}

enum Run {
    /// The bytes ended before STOP.
    More,
    Bad(Bad),
}

impl From<Bad> for Run {
    fn from(e: Bad) -> Run {
        Run::Bad(e)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    stack: Vec<Value>,
    memo: std::collections::HashMap<u64, Value>,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], Run> {
        let end = self.at.checked_add(n).ok_or(Run::More)?;
        let s = self.bytes.get(self.at..end).ok_or(Run::More)?;
        self.at = end;
        Ok(s)
    }

    fn uint(&mut self, n: usize) -> std::result::Result<u64, Run> {
        let s = self.take(n)?;
        Ok(s.iter().rev().fold(0u64, |v, &b| (v << 8) | b as u64))
    }

    fn line(&mut self) -> std::result::Result<String, Run> {
        let rest = self.bytes.get(self.at..).ok_or(Run::More)?;
        let n = rest.iter().position(|&b| b == b'\n').ok_or(Run::More)?;
        let s = String::from_utf8(rest[..n].to_vec()).map_err(|_| bad("a name is not UTF-8"))?;
        self.at += n + 1;
        Ok(s)
    }

    fn text(&mut self, n: u64) -> std::result::Result<Value, Run> {
        let n = usize::try_from(n).map_err(|_| bad("a string longer than memory"))?;
        let s = self.take(n)?;
        let s = std::str::from_utf8(s).map_err(|_| bad("a string is not UTF-8"))?;
        Ok(Value::Str(s.to_string()))
    }

    fn pop(&mut self) -> Result<Value> {
        self.stack
            .pop()
            .ok_or_else(|| bad("an opcode found the stack empty"))
    }

    /// The items above the topmost mark, which is taken off.
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let at = (self.stack.iter())
            .rposition(|v| matches!(v, Value::Mark))
            .ok_or_else(|| bad("no mark on the stack"))?;
        let items = self.stack.split_off(at + 1);
        self.stack.pop();
        Ok(items)
    }

    fn push(&mut self, v: Value) -> Result<()> {
        if self.stack.len() >= MAX_ITEMS {
            return Err(bad("a stack deeper than any state dict's"));
        }
        self.stack.push(v);
        Ok(())
    }

    fn put(&mut self, key: u64) -> Result<()> {
        let v = self
            .stack
            .last()
            .cloned()
            .ok_or_else(|| bad("a memo put on an empty stack"))?;
        if self.memo.len() >= MAX_ITEMS {
            return Err(bad("a memo larger than any state dict's"));
        }
        self.memo.insert(key, v);
        Ok(())
    }

    fn get(&mut self, key: u64) -> Result<()> {
        let v = self.memo.get(&key).cloned();
        self.push(v.ok_or_else(|| bad(format!("memo entry {key} was never put")))?)
    }

    fn run(&mut self) -> std::result::Result<Value, Run> {
        loop {
            let op = self.take(1)?[0];
            if op == b'.' {
                return Ok(self.pop()?); // STOP
            }
            let known = self.scalar(op)? || self.container(op)? || self.memo_op(op)?;
            if !(known || self.object(op)?) {
                return Err(bad(format!(
                    "opcode 0x{op:02x} at byte {}, which a state dict does not use",
                    self.at - 1
                ))
                .into());
            }
        }
    }

    /// The opcodes of numbers, texts, marks and the framing: whether `op` is one of them.
    fn scalar(&mut self, op: u8) -> std::result::Result<bool, Run> {
        match op {
            0x80 => drop(self.take(1)?), // PROTO
            0x95 => drop(self.take(8)?), // FRAME: a length only
            b'(' => self.push(Value::Mark)?,
            b'N' => self.push(Value::None)?,
            0x88 => self.push(Value::Bool)?,
            0x89 => self.push(Value::Bool)?,
            b'K' => {
                let v = self.uint(1)? as i64;
                self.push(Value::Int(v))?
            }
            b'M' => {
                let v = self.uint(2)? as i64;
                self.push(Value::Int(v))?
            }
            b'J' => {
                let v = self.uint(4)? as u32 as i32 as i64;
                self.push(Value::Int(v))?
            }
            0x8a => {
                // LONG1: n little-endian two's-complement bytes.
                let n = self.uint(1)? as usize;
                if n > 8 {
                    return Err(bad("an integer wider than 64 bits").into());
                }
                let s = self.take(n)?;
                let mut v = s.iter().rev().fold(0i64, |v, &b| (v << 8) | b as i64);
                if n > 0 && n < 8 && s[n - 1] & 0x80 != 0 {
                    v -= 1i64 << (8 * n);
                }
                self.push(Value::Int(v))?
            }
            b'G' => {
                self.take(8)?;
                self.push(Value::Float)?
            }
            b'X' | 0x8c | 0x8d => {
                let width = match op {
                    b'X' => 4,
                    0x8c => 1,
                    _ => 8,
                };
                let n = self.uint(width)?;
                let v = self.text(n)?;
                self.push(v)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The opcodes that build tuples, lists and dicts: whether `op` is one of them.
    fn container(&mut self, op: u8) -> std::result::Result<bool, Run> {
        match op {
            b')' => self.push(Value::Tuple(Vec::new()))?,
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items))?
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                if self.stack.len() < n {
                    return Err(bad("a tuple of more items than the stack holds").into());
                }
                let items = self.stack.split_off(self.stack.len() - n);
                if items.iter().any(|v| matches!(v, Value::Mark)) {
                    return Err(bad("a mark inside a tuple").into());
                }
                self.push(Value::Tuple(items))?
            }
            b']' => self.push(Value::List(Vec::new()))?,
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Value::List(items))?
            }
            b'}' => self.push(Value::Dict(Vec::new()))?,
            b'd' => {
                let items = self.pop_mark()?;
                let d = pairs(items)?;
                self.push(Value::Dict(d))?
            }
            b'a' => {
                let v = self.pop()?;
                self.append(vec![v])?
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.append(items)?
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                self.set(vec![(k, v)])?
            }
            b'u' => {
                let items = self.pop_mark()?;
                let d = pairs(items)?;
                self.set(d)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The memo's opcodes: whether `op` is one of them.
    fn memo_op(&mut self, op: u8) -> std::result::Result<bool, Run> {
        match op {
            b'q' => {
                let k = self.uint(1)?;
                self.put(k)?
            }
            b'r' => {
                let k = self.uint(4)?;
                self.put(k)?
            }
            0x94 => {
                let k = self.memo.len() as u64;
                self.put(k)?
            }
            b'h' => {
                let k = self.uint(1)?;
                self.get(k)?
            }
            b'j' => {
                let k = self.uint(4)?;
                self.get(k)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The opcodes of objects: globals, persistent ids (the storages), calls and their state:
    /// whether `op` is one of them.
    fn object(&mut self, op: u8) -> std::result::Result<bool, Run> {
        match op {
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                self.push(global(module, name)?)?
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Value::Str(m), Value::Str(n)) = (module, name) else {
                    return Err(bad("STACK_GLOBAL of something not a name").into());
                };
                self.push(global(m, n)?)?
            }
            b'Q' => {
                let pid = self.pop()?;
                self.push(storage(pid)?)?
            }
            b'R' => {
                let args = self.pop()?;
                let f = self.pop()?;
                self.push(call(f, args)?)?
            }
            b'b' => {
                // BUILD: an object's state (an OrderedDict's `_metadata`): not needed.
                self.pop()?;
                if self.stack.is_empty() {
                    return Err(bad("BUILD with no object").into());
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn append(&mut self, items: Vec<Value>) -> Result<()> {
        match self.stack.last_mut() {
            Some(Value::List(l)) => {
                l.extend(items);
                Ok(())
            }
            _ => Err(bad("APPEND to something not a list")),
        }
    }

    fn set(&mut self, items: Vec<(Value, Value)>) -> Result<()> {
        match self.stack.last_mut() {
            Some(Value::Dict(d)) => {
                d.extend(items);
                Ok(())
            }
            _ => Err(bad("SETITEM on something not a dict")),
        }
    }
}

fn pairs(items: Vec<Value>) -> Result<Vec<(Value, Value)>> {
    if !items.len().is_multiple_of(2) {
        return Err(bad("a dict of an odd number of items"));
    }
    let mut it = items.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

/// The callables a state dict names; anything else is refused.
fn global(module: String, name: String) -> Result<Value> {
    let known = matches!(
        (module.as_str(), name.as_str()),
        ("collections", "OrderedDict")
            | ("torch._utils", "_rebuild_tensor_v2")
            | ("torch._utils", "_rebuild_parameter")
    ) || (module == "torch" && name.ends_with("Storage"));
    if !known {
        return Err(Bad(format!(
            "data.pkl calls {module}.{name}, which a state dict never does; \
             it is not run (only tensors are read from a .bin)"
        )));
    }
    Ok(Value::Global(name))
}

fn int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

fn ints(v: &Value) -> Option<Vec<u64>> {
    match v {
        Value::Tuple(items) => items.iter().map(int).collect(),
        _ => None,
    }
}

/// A persistent id: `('storage', torch.<T>Storage, key, location, numel)`.
fn storage(pid: Value) -> Result<Value> {
    if let Value::Tuple(t) = &pid {
        if let [Value::Str(kind), Value::Global(ty), Value::Str(key), _, n] = &t[..] {
            if let (true, Some(n)) = (kind == "storage", int(n)) {
                return Ok(Value::Storage(ty.clone(), key.clone(), n));
            }
        }
    }
    Err(bad("a persistent id that is not a storage"))
}

fn call(f: Value, args: Value) -> Result<Value> {
    let Value::Global(name) = &f else {
        return Err(bad("REDUCE of something not callable"));
    };
    let Value::Tuple(args) = args else {
        return Err(bad("REDUCE with arguments that are not a tuple"));
    };
    match name.as_str() {
        "OrderedDict" if args.is_empty() => Ok(Value::Dict(Vec::new())),
        // (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
        "_rebuild_tensor_v2" if args.len() >= 4 => {
            let (Value::Storage(ty, key, numel), Some(offset), Some(shape), Some(stride)) =
                (&args[0], int(&args[1]), ints(&args[2]), ints(&args[3]))
            else {
                return Err(bad(
                    "a tensor whose storage, offset, size or stride is malformed",
                ));
            };
            Ok(Value::Tensor(TensorView {
                storage_type: ty.clone(),
                key: key.clone(),
                numel: *numel,
                offset,
                shape,
                stride,
            }))
        }
        // (tensor, requires_grad, backward_hooks): the tensor.
        "_rebuild_parameter" if matches!(args.first(), Some(Value::Tensor(_))) => {
            Ok(args.into_iter().next().expect("one"))
        }
        _ => Err(bad(format!("{name} called with unexpected arguments"))),
    }
}
