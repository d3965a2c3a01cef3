//! Where `gpt2`'s model and texts come from: the model flags (`--model`, a path or a name in the
//! local Hugging Face cache, `--backend`, `--dtype`, `--kernel`, `--threads`) and the load with its
//! progress bar; the prompt or text given inline, as a file, or on stdin.

use super::{hub, usage, CliResult, Fail};
use clap::{Args, ValueEnum};
use gpt2_web::{BackendChoice, CpuDtype, Model};
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// WebGPU on a hardware adapter when there is one, else the CPU
    Auto,
    Cpu,
    /// wgpu on Vulkan, Metal or DX12 (a software adapter too)
    #[value(alias = "gpu")]
    Webgpu,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum DtypeArg {
    /// 8-bit weights in blocks of 32 (the default)
    Q8,
    /// 32-bit weights: exact
    F32,
    /// 16-bit weight matrices on WebGPU (adapters with shader-f16; f32 arithmetic); q8 on the CPU
    F16,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GpuKernelArg {
    Auto,
    Bytes,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GpuSubgroupsArg {
    Auto,
    Off,
}

/// Where the model is and what runs it.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// A folder with config.json, model.safetensors and tokenizer.json, or a GGUF file (which
    /// holds its config and tokenizer), or the name of a model in the local Hugging Face cache
    /// (`gpt2`, `openai-community/gpt2`; never downloaded)
    #[arg(short = 'm', long, value_name = "PATH")]
    pub model: PathBuf,
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// The weight format: q8 (the default) or f32, on the CPU and on WebGPU; f16 on WebGPU (q8 on the
    /// CPU)
    #[arg(long, value_enum, default_value = "q8")]
    pub dtype: DtypeArg,
    /// The CPU's 8-bit kernel: auto (the best this CPU has) or one it has by name (avx2,
    /// avx-vnni, avx512-vnni, portable); the same integer sums in each, for timing them
    #[arg(long, default_value = "auto", value_name = "NAME")]
    pub kernel: String,
    /// How the GPU's q8 kernels take their products: auto (dot4I8Packed, four weights at a time,
    /// where the adapter's WGSL has it) or bytes (a weight at a time, the fallback); for timing
    /// them
    #[arg(long, value_enum, default_value = "auto", value_name = "WAY")]
    pub gpu_kernel: GpuKernelArg,
    /// Whether the GPU's reductions take their smallest strides by subgroup shuffles: auto
    /// (where the device has subgroups) or off (every stride through workgroup memory); for
    /// timing them
    #[arg(long, value_enum, default_value = "auto", value_name = "WAY")]
    pub gpu_subgroups: GpuSubgroupsArg,
    /// Threads for the CPU's matrix products (a build with the `threads` feature; else 1)
    #[arg(short = 't', long, value_name = "N")]
    pub threads: Option<usize>,
}

impl ModelArgs {
    pub fn load(&self) -> CliResult<Model> {
        let backend = match self.backend {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Cpu => BackendChoice::Cpu,
            BackendArg::Webgpu => BackendChoice::WebGpu,
        };
        gpt2_web::backend::cpu::q8::set_kernel(&self.kernel)?;
        gpt2_web::model::set_gpu_q8_bytes(self.gpu_kernel == GpuKernelArg::Bytes);
        gpt2_web::model::set_gpu_subgroups(self.gpu_subgroups == GpuSubgroupsArg::Auto);
        set_threads(self.threads)?;
        let path = model_path(&self.model)?;
        let (dtype, f16) = match self.dtype {
            DtypeArg::Q8 => (CpuDtype::Q8, false),
            DtypeArg::F32 => (CpuDtype::F32, false),
            DtypeArg::F16 => (CpuDtype::Q8, true),
        };
        let bar = load_bar();
        let progress: gpt2_web::model::LoadProgress = {
            let bar = bar.clone();
            std::sync::Arc::new(move |tensor, done, total| {
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(tensor.to_string());
            })
        };
        let model = Model::load_dir_reporting(&path, backend, dtype, f16, Some(progress));
        bar.finish_and_clear();
        Ok(model?)
    }
}

/// A bar on stderr while the weights load: the bytes taken in and the tensor being converted;
/// drawn only when stderr is a terminal, and cleared when the load ends.
fn load_bar() -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let style = indicatif::ProgressStyle::with_template(
        "loading {bar:30} {bytes}/{total_bytes} {wide_msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    indicatif::ProgressBar::new(0).with_style(style)
}

/// `--model` as given, or the snapshot in the Hugging Face cache it names (said on stderr).
pub fn model_path(given: &Path) -> CliResult<PathBuf> {
    let path = hub::resolve(given).map_err(|why| Fail(1, format!("--model {why}")))?;
    if path != given {
        eprintln!(
            "[--model {}: from the Hugging Face cache, {}]",
            given.display(),
            path.display()
        );
    }
    Ok(path)
}

/// `--threads N`: the matrix products' thread pool, made once per process (a draft model's
/// load, which carries the same flags, finds it made).
fn set_threads(n: Option<usize>) -> CliResult<()> {
    static MADE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if MADE.get().is_some() {
        return Ok(());
    }
    let made = make_threads(n);
    if made.is_ok() {
        let _ = MADE.set(());
    }
    made
}

fn make_threads(n: Option<usize>) -> CliResult<()> {
    match n {
        None => Ok(()),
        Some(0) => Err(usage("--threads 0: give at least 1")),
        #[cfg(feature = "threads")]
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|e| Fail(1, format!("--threads {n}: {e}"))),
        #[cfg(not(feature = "threads"))]
        Some(1) => Ok(()),
        #[cfg(not(feature = "threads"))]
        Some(n) => Err(usage(format!(
            "--threads {n}: this gpt2 was built for one thread (cargo build --release --features threads runs the products on several)"
        ))),
    }
}

/// A text given inline, as a file, or on stdin.
#[derive(Args)]
#[group(required = false, multiple = false)]
pub struct PromptArg {
    /// The prompt; `-` reads it from stdin, as does a prompt piped in with neither flag
    #[arg(short = 'p', long, value_name = "TEXT")]
    pub prompt: Option<String>,
    /// The prompt, from a UTF-8 file
    #[arg(long, value_name = "PATH")]
    pub prompt_file: Option<PathBuf>,
}

impl PromptArg {
    pub fn text(&self) -> CliResult<String> {
        use std::io::{IsTerminal, Read};
        let none = || {
            usage("no prompt: give --prompt TEXT (- for stdin), --prompt-file PATH, or pipe one in")
        };
        // What stdin holds, without the one line end `echo` adds; nothing is no prompt.
        let piped = || -> CliResult<String> {
            let mut text = String::new();
            (std::io::stdin().read_to_string(&mut text))
                .map_err(|e| usage(format!("the prompt on stdin: {e}")))?;
            let text = (text.strip_suffix('\n'))
                .map(|t| t.strip_suffix('\r').unwrap_or(t))
                .unwrap_or(&text);
            match text.is_empty() {
                true => Err(none()),
                false => Ok(text.to_string()),
            }
        };
        match (self.prompt.as_deref(), self.prompt_file.as_deref()) {
            (Some("-"), _) => piped(),
            (None, None) if !std::io::stdin().is_terminal() => piped(),
            (None, None) => Err(none()),
            (inline, file) => text_of(inline.map(String::from).as_ref(), file, "--prompt-file"),
        }
    }
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct TextArg {
    /// The text
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// The text, from a UTF-8 file
    #[arg(long, value_name = "PATH")]
    pub text_file: Option<PathBuf>,
}

pub fn text_of(inline: Option<&String>, file: Option<&Path>, flag: &str) -> CliResult<String> {
    match (inline, file) {
        (Some(t), _) => Ok(t.clone()),
        (None, Some(p)) => {
            std::fs::read_to_string(p).map_err(|e| usage(format!("{flag} {}: {e}", p.display())))
        }
        (None, None) => Err(usage(format!("give the text or {flag}"))),
    }
}
