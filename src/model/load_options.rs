//! The options of `Gpt2.load` (the JS API), one row each: their names, TypeScript types, checks
//! and documentation. The generated www/api/options.js (`LOAD_OPTIONS`, which gpt2.js checks
//! every load against: an unknown option is refused with a sentence naming it and the known
//! ones) and the `LoadOptions` interface of www/api/gpt2.d.ts follow from it
//! (`generate::generated::render_js`, `render_dts`).

/// How gpt2.js checks a load option's value (an absent one is not checked).
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Checked where it is read (`model`: sources.js).
    Any,
    /// A string.
    Text,
    /// One of the names of a generated list (`generate::generated::lists`), by its JS name.
    List(&'static str),
    /// A whole number in `min..=max`.
    Whole {
        min: f64,
        max: f64,
    },
    /// A finite number of at least `min`.
    Number {
        min: f64,
    },
    Bool,
    Function,
    /// An `AbortSignal`.
    Signal,
}

/// One option of `Gpt2.load`.
#[derive(Clone, Copy, Debug)]
pub struct LoadOption {
    pub js: &'static str,
    pub ts: &'static str,
    pub check: Check,
    pub doc: &'static str,
}

/// Every option of `Gpt2.load`, in the order gpt2.d.ts lists them.
pub const LOAD_OPTIONS: &[LoadOption] = &[
    LoadOption {
        js: "model",
        ts: "string | URL | ModelFiles | GgufFile",
        check: Check::Any,
        doc: "A model folder URL, resolved against the page (`document.baseURI`); a missing trailing '/' is added. The folder holds `config.json`, `model.safetensors` and `tokenizer.json`, e.g. `'models/gpt2-shakespeare/'` or `'https://huggingface.co/openai-community/gpt2/resolve/main/'`. Files from another origin are kept in the Cache API, so a second visit works offline. Or a Hugging Face model id, `'openai-community/gpt2'` (see `revision`, `file`, `hubHost`). Or the URL of a `.gguf` file (llama.cpp's format; it holds the config and the tokenizer). Or the files themselves, or a GGUF file as `{ weights }`. Default: the demo model folder beside gpt2.js (`new URL('./models/gpt2-shakespeare/', import.meta.url)`), so it also resolves when gpt2.js is imported from another origin; the npm package has no demo model, so pass `model` there.",
    },
    LoadOption {
        js: "revision",
        ts: "string",
        check: Check::Text,
        doc: "With a Hugging Face model id as `model` (`'openai-community/gpt2'`: `owner/name`, no scheme, no trailing '/'; write a relative folder as `'models/x/'`): the branch, tag or commit to load. Default 'main'. The id resolves to `<hubHost>/<id>/resolve/<revision>/`.",
    },
    LoadOption {
        js: "file",
        ts: "string",
        check: Check::Text,
        doc: "With a model id: the GGUF file of the repository to load (e.g. `'gpt2.Q8_0.gguf'`) instead of its folder.",
    },
    LoadOption {
        js: "hubHost",
        ts: "string",
        check: Check::Text,
        doc: "With a model id: the Hub's address, for a mirror. Default 'https://huggingface.co'.",
    },
    LoadOption {
        js: "backend",
        ts: "BackendChoice",
        check: Check::List("BACKENDS"),
        doc: "Which backend runs the model (BackendChoice). Default 'auto'.",
    },
    LoadOption {
        js: "dtype",
        ts: "Dtype",
        check: Check::List("DTYPES"),
        doc: "The weight format on the CPU: 'q8' (default) keeps each weight in 8 bits (blocks of 32 with a scale each, quantized as the model loads: about 3× faster per token than 'f32' and a quarter of the memory, at a small accuracy cost; see the README) or 'f32' (exact). WebGPU holds its weight matrices in the same format ('q8': the CPU's 8-bit weights, a quarter of f32's bytes, dequantized in its kernels, which round activations and KV cache as the CPU's q8 does), or in 16 bits for 'f16' (adapters with shader-f16; the arithmetic stays f32; half the bytes per token, within a documented tolerance of f32), and the CPU, if it runs instead or after a lost GPU, q8.",
    },
    LoadOption {
        js: "threads",
        ts: "number",
        check: Check::Whole { min: 1.0, max: 64.0 },
        doc: "Threads for the CPU engine. Several threads need a cross-origin isolated page (served with `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy: require-corp`; `./build.sh serve --isolated` sends them); elsewhere the engine runs on one thread whatever is asked. Default: the number of cores, at most 4, where allowed. The first model loaded decides for every model of the page (they share one worker); `model.threads` says what runs.",
    },
    LoadOption {
        js: "memoryLimit",
        ts: "number",
        check: Check::Number { min: 1.0 },
        doc: "The most memory (bytes) the model may need on the CPU: a model whose predicted peak is more is refused with a sentence after config.json, before its weights download. Default: what the wasm build can address (4 GiB; 2 GiB threaded), or about 1.5 GB on iOS and iPadOS, whose WebKit closes a tab there.",
    },
    LoadOption {
        js: "build",
        ts: "WasmBuild",
        check: Check::List("WASM_BUILDS"),
        doc: "The wasm build to run, by name, instead of the page's choice (api/builds.js; for benchmarks: the same code in every engine). Only the first load of a page's worker starts a build; `model.build` says which runs. A build the browser cannot run fails the load with a sentence.",
    },
    LoadOption {
        js: "kernel",
        ts: "Kernel",
        check: Check::List("KERNELS"),
        doc: "The CPU's 8-bit kernel, by name, instead of the engine's choice (for benchmarks: every kernel gives the same numbers). With relaxed SIMD: 'dot-add' (its four-way 8-bit dot: one instruction where the CPU has one, e.g. AVX-VNNI, five in V8 without), 'dot-i16' (its 16-bit dot, widened: three instructions everywhere) or 'widen' (bytes widened to 16 bits, no 8-bit dot); without relaxed SIMD only 'widen'. 'auto' (default): the engine asks V8 how it lowers the four-way dot, and where that is not one instruction it times 'dot-i16' and 'widen' once (about 30 ms at load) for a decode step and for a prompt. It applies to the page's worker, every model in it; `model.kernel` says which runs. One the build lacks fails the load with a sentence.",
    },
    LoadOption {
        js: "raceSoftwareGpu",
        ts: "boolean",
        check: Check::Bool,
        doc: "Let `backend: 'auto'` race a software adapter (SwiftShader, lavapipe) as if it were hardware, for tests and benchmarks on machines without a GPU (the CPU wins such a race). Default false.",
    },
    LoadOption {
        js: "onProgress",
        ts: "(progress: Progress) => void",
        check: Check::Function,
        doc: "Called as each file downloads (throttled to about every 50 ms, and once when a file is complete), and again, with `fallBack: true`, while a lost GPU's model is read again.",
    },
    LoadOption {
        js: "onBackendChange",
        ts: "(change: BackendChange) => void",
        check: Check::Function,
        doc: "Called when the model moves to another backend while it runs: when the GPU device is lost (driver reset, GPU process crash, out of memory) generation continues on the CPU, no token is lost, and this fires before the first token computed there. `reason` is a sentence.",
    },
    LoadOption {
        js: "signal",
        ts: "AbortSignal",
        check: Check::Signal,
        doc: "Aborts the load: the download, the building of the model and its warm-up stop, and load rejects with an AbortError (a DOMException), as fetch does. Other loads of the same model go on.",
    },
];
