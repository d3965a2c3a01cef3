//! Each kernel's WGSL source as a device compiles it: its file with the parts it calls
//! (`act_q8.wgsl`, `lanes.wgsl`), the one read of a weight rewritten for the format the weights
//! are held in (f16, q8), the packed q8 products swapped in where the WGSL has dot4I8Packed, and
//! subgroup shuffles where the device has them.

use super::kernels::Kernel;

/// A kernel's one read of a weight matrix: `array[row * stride + col]`, the stride N for `w` (a
/// Conv1D weight, (K, N)) and C for `wte` (a vocab chunk, (rows, C)).
struct WeightRead {
    array: &'static str,
    row: &'static str,
    col: &'static str,
}

/// The q8 read of weight (row, col) of `w` (blocks of 32 down each column, each block's bytes
/// contiguous, `[K / 32][N][32]`, the scales `[K / 32][N]` after them) or of `wte` (blocks of 32
/// along each row, the bytes in place, the scales `[rows][C / 32]` after them), as `formats.rs`
/// `to_q8` lays them out: a byte is a signed value, four to a word, lowest first; the value is
/// the byte times its block's scale.
fn q8_read(array: &str) -> String {
    let (byte, bytes, scale) = match array {
        "w" => (
            "((row >> 5u) * N + col) * 32u + (row & 31u)",
            "((dims.K + 31u) >> 5u) * N * 32u",
            "(row >> 5u) * N + col",
        ),
        _ => (
            "row * C + col",
            "dims.chunk_rows * C",
            "row * ((C + 31u) >> 5u) + (col >> 5u)",
        ),
    };
    let stride = if array == "w" { "N" } else { "C" };
    format!(
        "// q8: weight (row, col) of {array}, its byte times its block's scale (sources.rs).\n\
         fn q8_{array}(row: u32, col: u32) -> f32 {{\n\
         \x20   let {stride} = dims.{stride};\n\
         \x20   let i = {byte};\n\
         \x20   let q = extractBits(i32({array}[i >> 2u]), (i & 3u) * 8u, 8u);\n\
         \x20   let scales = ({bytes} + 3u) / 4u;\n\
         \x20   return f32(q) * bitcast<f32>({array}[scales + {scale}]);\n\
         }}\n"
    )
}

impl Kernel {
    /// How the kernels that reduce by trees take their smallest strides without subgroups
    /// (appended to their source; `source_for` swaps in lanes_subgroup.wgsl where the device
    /// has them).
    pub const LANES: &str = include_str!("shaders/lanes.wgsl");

    /// The WGSL source for weight matrices held in `format`: as written (f32), or with its one
    /// read of a weight rewritten (f16: the value widened; q8: `q8_read`); kernels that read no
    /// weight matrix as they are. With q8 and `packed` (the adapter's WGSL has dot4I8Packed), a
    /// kernel with a packed part (`packed_part`) takes its products four weights at a time. With
    /// `subgroups` (the device has them: `Context::subgroup`), the kernels whose reductions are
    /// trees take their smallest strides by subgroup shuffles (lanes_subgroup.wgsl in place of
    /// lanes.wgsl).
    pub fn source_for(
        self,
        format: super::Format,
        packed: bool,
        subgroups: bool,
    ) -> std::borrow::Cow<'static, str> {
        let src = self.source_packed(format, packed);
        if !(subgroups && self.reduces()) {
            return src;
        }
        let (none, lanes) = (Kernel::LANES, include_str!("shaders/lanes_subgroup.wgsl"));
        assert!(src.matches(none).count() == 1, "{}: no lanes", self.name());
        // No `enable subgroups;`: naga takes the builtins without it (and refuses the directive),
        // and wgpu passes no subgroups to a browser yet.
        src.replace(none, lanes).into()
    }

    fn source_packed(self, format: super::Format, packed: bool) -> std::borrow::Cow<'static, str> {
        use super::Format;
        match (format, self.packed_part()) {
            (Format::Q8, Some((name, part))) if packed => {
                let src = self.source_bytes(format);
                let (from, to) = (format!("fn {name}("), format!("fn {name}_bytes("));
                assert!(
                    src.matches(&from).count() == 1,
                    "{}: no {name}",
                    self.name()
                );
                let shared = include_str!("shaders/q8_packed.wgsl");
                format!("{}\n{part}\n{shared}", src.replace(&from, &to)).into()
            }
            _ => self.source_bytes(format),
        }
    }

    /// The function a kernel's products are taken in and the WGSL that takes them four q8
    /// weights at a time with dot4I8Packed instead (its own file, which `source_for` swaps in,
    /// with `q8_packed.wgsl` after it).
    pub fn packed_part(self) -> Option<(&'static str, &'static str)> {
        match self {
            Kernel::LmHead => Some(("head_sums", include_str!("shaders/lm_head_packed.wgsl"))),
            Kernel::MatmulGemv | Kernel::MatmulGemvLn => {
                Some(("dot_slice", include_str!("shaders/gemv_packed.wgsl")))
            }
            _ => None,
        }
    }

    fn source_bytes(self, format: super::Format) -> std::borrow::Cow<'static, str> {
        use super::Format;
        let Some(WeightRead { array, row, col }) = self.weight_read() else {
            return self.source().into();
        };
        let decl = format!("var<storage, read> {array}: array<f32>;");
        let stride = if array == "w" { "N" } else { "C" };
        let read = format!("{array}[{row} * {stride} + {col}]");
        let src = self.source();
        assert!(
            src.matches(&decl).count() == 1 && src.matches(&read).count() == 1,
            "{}: the weights' rewrite no longer matches the shader",
            self.name()
        );
        match format {
            Format::F32 => src.into(),
            Format::F16 => {
                let src = src
                    .replace(&decl, &decl.replace("array<f32>", "array<f16>"))
                    .replace(&read, &format!("f32({read})"));
                format!("enable f16;\n{src}").into()
            }
            Format::Q8 => {
                let src = src
                    .replace(&decl, &decl.replace("array<f32>", "array<u32>"))
                    .replace(&read, &format!("q8_{array}({row}, {col})"));
                format!("{src}\n{}", q8_read(array)).into()
            }
        }
    }

    /// The weight matrix a kernel reads, if it reads one, and the row and column of its one read.
    fn weight_read(self) -> Option<WeightRead> {
        let (array, row, col) = match self {
            Kernel::MatmulTiled => ("w", "(k0 + lid.y)", "col"),
            Kernel::MatmulGemv | Kernel::MatmulGemvLn => ("w", "k", "col"),
            Kernel::LmHead => ("wte", "r", "c"),
            Kernel::Embedding => ("wte", "(id - dims.chunk_start)", "c"),
            _ => return None,
        };
        Some(WeightRead { array, row, col })
    }

    /// The parts after the kernel's file in its source, in order (stems under shaders/):
    /// `act_q8`, the q8 rounding of a product's input row (on with `Q8_ACT`); `gemv_dot`, the
    /// GEMVs' products over a slice of their rows (`input`); `workgroup_sum`, a sum over the
    /// workgroup; `lanes`, how a tree's smallest strides are taken (`reduces`).
    pub fn parts(self) -> &'static [&'static str] {
        use Kernel::*;
        match self {
            MatmulGemv => &["act_q8", "gemv_dot"],
            LmHead => &["act_q8", "lanes"],
            MatmulGemvLn => &["act_q8", "gemv_dot", "workgroup_sum", "lanes"],
            LayerNorm => &["workgroup_sum", "lanes"],
            Attention | Argmax => &["lanes"],
            Embedding | MatmulTiled | KvWrite | TopK | Quantize => &[],
        }
    }

    /// The WGSL source: its file, then its `parts`.
    pub fn source(self) -> &'static str {
        macro_rules! shader {
            ($($stem:literal),+) => {
                concat!($(include_str!(concat!("shaders/", $stem, ".wgsl"))),+)
            };
        }
        match self {
            Kernel::Embedding => shader!("embedding"),
            Kernel::LayerNorm => shader!("layernorm", "workgroup_sum", "lanes"),
            Kernel::MatmulTiled => shader!("matmul_tiled"),
            Kernel::MatmulGemv => shader!("matmul_gemv", "act_q8", "gemv_dot"),
            Kernel::KvWrite => shader!("kv_write"),
            Kernel::Attention => shader!("attention", "lanes"),
            Kernel::LmHead => shader!("lm_head", "act_q8", "lanes"),
            Kernel::MatmulGemvLn => {
                shader!(
                    "matmul_gemv_ln",
                    "act_q8",
                    "gemv_dot",
                    "workgroup_sum",
                    "lanes"
                )
            }
            Kernel::Argmax => shader!("argmax", "lanes"),
            Kernel::TopK => shader!("top_k"),
            Kernel::Quantize => shader!("quantize"),
        }
    }
}
