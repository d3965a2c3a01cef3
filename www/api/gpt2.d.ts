// TypeScript types for gpt2.js, gpt2-web's JavaScript API.

// <generated: src/generate/options.rs>
// Generated from src/generate/options.rs by `GPT2_BLESS=1 cargo test --test generated`; do not edit.

/**
 * Which backend to run on. 'auto' picks WebGPU when a hardware adapter is available and the
 * model fits, else the CPU (a software adapter such as SwiftShader is slower than the CPU
 * backend, so 'auto' never picks one). 'webgpu' takes any adapter, and load rejects when there
 * is none.
 */
export type BackendChoice = 'auto' | 'cpu' | 'webgpu';

/** Weight format: 'q8' or 'f32', on the CPU and on WebGPU; 'f16' on WebGPU (q8 on the CPU). */
export type Dtype = 'q8' | 'f32' | 'f16';

/** The CPU's 8-bit kernel in the browser: 'auto' (the engine's choice) or one by name. */
export type Kernel = 'auto' | 'dot-add' | 'dot-i16' | 'widen';

/**
 * The kind of failure a rejected promise's Error carries as `code` (decide by it, not by the
 * sentence; Error::code in src/error.rs): 'param' an option out of range, 'gpu' a WebGPU
 * failure, after which 'auto' runs on the CPU, 'memory' an allocation refused, 'budget' the
 * memory budget refusing a model, 'state' the engine used out of turn, 'busy' the model's
 * queue is full (LIMITS.maxQueue requests wait; try again later), 'crash' a trap inside
 * WebAssembly (load the model again), …
 */
export type Gpt2ErrorCode = 'io' | 'config' | 'weights' | 'tokenizer' | 'param' | 'prompt_too_long' | 'memory' | 'budget' | 'state' | 'busy' | 'crash' | 'backend' | 'gpu' | 'cpu';

/**
 * The wasm builds (./build.sh): 'pkg' (simd128, every engine), 'pkg-relaxed' (relaxed SIMD),
 * 'pkg-threads' (relaxed SIMD and threads, on a cross-origin isolated page).
 */
export type WasmBuild = 'pkg' | 'pkg-relaxed' | 'pkg-threads';

/** Why generation ended. */
export type StopReason = 'eos' | 'stop' | 'max_tokens' | 'context' | 'abort';

/**
 * The engine's limits (src/scheduler): maxBatch: the most generations of one model that share
 * a step. maxQueue: the most requests (each choice of n counts) that wait for one model; more
 * are refused with code 'busy'. maxChoices: the most choices (n) of one call.
 */
export declare const LIMITS: Readonly<{ maxBatch: number; maxQueue: number; maxChoices: number }>;

/** The options of Gpt2.load (src/model/load_options.rs). */
export interface LoadOptions {
  /**
   * A model folder URL, resolved against the page (`document.baseURI`); a missing trailing '/'
   * is added. The folder holds `config.json`, `model.safetensors` and `tokenizer.json`, e.g.
   * `'models/gpt2-shakespeare/'` or
   * `'https://huggingface.co/openai-community/gpt2/resolve/main/'`. Files from another origin
   * are kept in the Cache API, so a second visit works offline. Or a Hugging Face model id,
   * `'openai-community/gpt2'` (see `revision`, `file`, `hubHost`). Or the URL of a `.gguf` file
   * (llama.cpp's format; it holds the config and the tokenizer). Or the files themselves, or a
   * GGUF file as `{ weights }`. Default: the demo model folder beside gpt2.js (`new
   * URL('./models/gpt2-shakespeare/', import.meta.url)`), so it also resolves when gpt2.js is
   * imported from another origin; the npm package has no demo model, so pass `model` there.
   */
  model?: string | URL | ModelFiles | GgufFile;
  /**
   * With a Hugging Face model id as `model` (`'openai-community/gpt2'`: `owner/name`, no scheme,
   * no trailing '/'; write a relative folder as `'models/x/'`): the branch, tag or commit to
   * load. Default 'main'. The id resolves to `<hubHost>/<id>/resolve/<revision>/`.
   */
  revision?: string;
  /**
   * With a model id: the GGUF file of the repository to load (e.g. `'gpt2.Q8_0.gguf'`) instead
   * of its folder.
   */
  file?: string;
  /** With a model id: the Hub's address, for a mirror. Default 'https://huggingface.co'. */
  hubHost?: string;
  /** Which backend runs the model (BackendChoice). Default 'auto'. */
  backend?: BackendChoice;
  /**
   * The weight format on the CPU: 'q8' (default) keeps each weight in 8 bits (blocks of 32 with
   * a scale each, quantized as the model loads: about 3× faster per token than 'f32' and a
   * quarter of the memory, at a small accuracy cost; see the README) or 'f32' (exact). WebGPU
   * holds its weight matrices in the same format ('q8': the CPU's 8-bit weights, a quarter of
   * f32's bytes, dequantized in its kernels, which round activations and KV cache as the CPU's
   * q8 does), or in 16 bits for 'f16' (adapters with shader-f16; the arithmetic stays f32; half
   * the bytes per token, within a documented tolerance of f32), and the CPU, if it runs instead
   * or after a lost GPU, q8.
   */
  dtype?: Dtype;
  /**
   * Threads for the CPU engine. Several threads need a cross-origin isolated page (served with
   * `Cross-Origin-Opener-Policy: same-origin` and `Cross-Origin-Embedder-Policy: require-corp`;
   * `./build.sh serve --isolated` sends them); elsewhere the engine runs on one thread whatever
   * is asked. Default: the number of cores, at most 4, where allowed. The first model loaded
   * decides for every model of the page (they share one worker); `model.threads` says what runs.
   */
  threads?: number;
  /**
   * The most memory (bytes) the model may need on the CPU: a model whose predicted peak is more
   * is refused with a sentence after config.json, before its weights download. Default: what the
   * wasm build can address (4 GiB; 2 GiB threaded), or about 1.5 GB on iOS and iPadOS, whose
   * WebKit closes a tab there.
   */
  memoryLimit?: number;
  /**
   * The wasm build to run, by name, instead of the page's choice (api/builds.js; for benchmarks:
   * the same code in every engine). Only the first load of a page's worker starts a build;
   * `model.build` says which runs. A build the browser cannot run fails the load with a
   * sentence.
   */
  build?: WasmBuild;
  /**
   * The CPU's 8-bit kernel, by name, instead of the engine's choice (for benchmarks: every
   * kernel gives the same numbers). With relaxed SIMD: 'dot-add' (its four-way 8-bit dot: one
   * instruction where the CPU has one, e.g. AVX-VNNI, five in V8 without), 'dot-i16' (its 16-bit
   * dot, widened: three instructions everywhere) or 'widen' (bytes widened to 16 bits, no 8-bit
   * dot); without relaxed SIMD only 'widen'. 'auto' (default): the engine asks V8 how it lowers
   * the four-way dot, and where that is not one instruction it times 'dot-i16' and 'widen' once
   * (about 30 ms at load) for a decode step and for a prompt. It applies to the page's worker,
   * every model in it; `model.kernel` says which runs. One the build lacks fails the load with a
   * sentence.
   */
  kernel?: Kernel;
  /**
   * Let `backend: 'auto'` race a software adapter (SwiftShader, lavapipe) as if it were
   * hardware, for tests and benchmarks on machines without a GPU (the CPU wins such a race).
   * Default false.
   */
  raceSoftwareGpu?: boolean;
  /**
   * Called as each file downloads (throttled to about every 50 ms, and once when a file is
   * complete), and again, with `fallBack: true`, while a lost GPU's model is read again.
   */
  onProgress?: (progress: Progress) => void;
  /**
   * Called when the model moves to another backend while it runs: when the GPU device is lost
   * (driver reset, GPU process crash, out of memory) generation continues on the CPU, no token
   * is lost, and this fires before the first token computed there. `reason` is a sentence.
   */
  onBackendChange?: (change: BackendChange) => void;
  /**
   * Aborts the load: the download, the building of the model and its warm-up stop, and load
   * rejects with an AbortError (a DOMException), as fetch does. Other loads of the same model go
   * on.
   */
  signal?: AbortSignal;
}

/** The generate options the engine reads (GenerateOptions adds signal and onToken). */
export interface EngineOptions {
  /** Most tokens to generate. In 1..=1000000000. Default 64. */
  maxTokens?: number;
  /**
   * 0 = greedy (always the most likely token), as is anything below 1e-4; otherwise the logits
   * are divided by it. In 0..=100. Default 0.
   */
  temperature?: number;
  /** Keep only the k most likely tokens; 0 = off. In 0..=1000000000. Default 0. */
  topK?: number;
  /**
   * Nucleus sampling: keep the most likely tokens whose probabilities sum to p; 1 = off. In (0,
   * 1]. Default 1.
   */
  topP?: number;
  /**
   * Drop tokens less likely than minP × the top token's probability; 0 = off. In 0..=1. Default
   * 0.
   */
  minP?: number;
  /**
   * Penalise tokens already in the prompt or output (> 1 discourages repeats); 1 = off. In (0,
   * 100]. Default 1.
   */
  repetitionPenalty?: number;
  /**
   * Seed of the sampler's random numbers: the same seed and options give the same text. In
   * 0..=9007199254740991. Default 0.
   */
  seed?: number;
  /**
   * Generations of the prompt at once, as one batch: choice i samples with seed + i, so it
   * equals a single generation with that seed (the plain loop: not with beams or a draft). In
   * 1..=16. Default 1.
   */
  n?: number;
  /**
   * Generation ends before any of these texts, which are not returned (at most 16, of at most
   * 1000 bytes each). Default none.
   */
  stop?: string[] | string;
  /** Give each token event the sampler's top candidates. In 0..=100. Default 0. */
  topLogprobs?: number;
  /** Do not stop at end-of-text (for fixed-length measurements). Default false. */
  ignoreEos?: boolean;
  /**
   * Time each phase of each CPU forward pass and return the sums as the result's profile (the
   * GPU has none). Default false.
   */
  profile?: boolean;
  /**
   * Speculative decoding: 'prompt-lookup' drafts from n-grams of the prompt and the text so far,
   * 'mtp' from the model's own multi-token prediction heads (a model without them refuses it), a
   * loaded smaller GPT-2 of the same vocabulary drafts with the same sampler settings; one
   * forward pass checks each draft, and the output is the same as without (greedy) or has the
   * same distribution (sampling). Default 'none'.
   */
  draft?: 'prompt-lookup' | 'mtp' | 'none' | Gpt2;
  /** The most tokens one draft proposes (the length adapts below it). In 1..=15. Default 8. */
  draftTokens?: number;
  /**
   * With draft 'mtp': let the heads draft even where this engine measured that they make
   * decoding slower (`metrics.mtp` gives the verdict; without it such a generation runs the
   * plain loop, the same tokens). For the lab and benchmarks. Default false.
   */
  forceDraft?: boolean;
  /**
   * false: no KV cache, every step recomputes the whole sequence (the lesson's naive loop): the
   * same tokens, a step that grows with the position. Not with draft. Default true.
   */
  kvCache?: boolean;
  /**
   * Prefix caching: start from the keys and values of the prompt's first tokens when an earlier
   * generation on this model computed them (the same prompt again, a fixed preamble, a chat's
   * history, the n choices), the same logits bit for bit; on the CPU in q8, where each row is
   * computed alike in any pass (elsewhere the whole prompt runs). false: always run the whole
   * prompt (to time prefill). Default true.
   */
  prefixCache?: boolean;
  /**
   * Beam search with this many beams (1 = off), as transformers' generate(num_beams=N,
   * do_sample=False): deterministic (temperature 0), not with draft; tokens are handed out once
   * every beam that could still win agrees on them, and the result lists every finished beam. In
   * 1..=16. Default 1.
   */
  numBeams?: number;
  /**
   * Beams are ranked by total log-probability / length ^ lengthPenalty (> 0 favours longer
   * ones). In -100..=100. Default 1.
   */
  lengthPenalty?: number;
  /**
   * When beam search stops: false (transformers' heuristic), true (as soon as numBeams beams
   * finished) or 'never' (only when no running beam could beat them at any length). Default
   * false.
   */
  earlyStopping?: boolean | 'never';
}
// </generated>

/** The three files of a Hugging Face-style model folder, as bytes (e.g. from `<input type="file">`). */
export interface ModelFiles {
  /** `config.json` */
  config: ArrayBuffer | ArrayBufferView | Blob;
  /** `model.safetensors` (f32, f16 or bf16; tensor names with or without the `transformer.` prefix) */
  weights: ArrayBuffer | ArrayBufferView | Blob;
  /** `tokenizer.json` (Hugging Face tokenizers format) */
  tokenizer: ArrayBuffer | ArrayBufferView | Blob;
}

/**
 * A GGUF file alone (llama.cpp's format, architecture `gpt2`): its header holds the config and
 * the tokenizer. Types F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K.
 */
export interface GgufFile {
  weights: ArrayBuffer | ArrayBufferView | Blob;
}

/** Download progress of one model file. */
export interface Progress {
  /** 'config.json', 'model.safetensors' or 'tokenizer.json'. */
  file: string;
  /** Bytes received so far. */
  loaded: number;
  /**
   * Expected bytes: for the weights, the length their header gives once it has arrived, before
   * that Content-Length (0 when the server does not say); null while a fall-back reads them again.
   */
  total: number | null;
  /**
   * model.safetensors streams: each tensor is converted (or uploaded to the GPU) as soon as its
   * bytes are in, so the file is never whole in memory. The tensor whose bytes come next, e.g.
   * 'h.3.mlp.c_fc.weight' (null for the other files and once the last tensor is in).
   */
  tensor?: string | null;
  /** True when the file came from the browser's Cache API (a model from another origin fetched before). */
  cached: boolean;
  /**
   * Once, before the weights are read: what the model will need on the CPU, predicted from
   * config.json alone and checked against what this build can address (see `Gpt2.plan`).
   */
  plan?: MemoryPlan;
  /**
   * True while a model whose GPU was lost is rebuilt on the CPU from its weights read again (from
   * the Cache API, the files given, or the URL; the file is not kept in memory for it).
   */
  fallBack?: boolean;
}

/** A model's memory on the CPU, predicted from config.json alone, in bytes. */
export interface MemoryPlan {
  /** The weights in their runtime format (q8 or f32). */
  weights: number;
  /** Keys and values of every layer for the whole context. */
  kvCache: number;
  /** Working buffers of a forward pass over a full context, and the logits. */
  activations: number;
  /** The most of the weights file held at once while loading: one tensor (the file streams in). */
  file: number;
  /** Working memory of converting a tensor (0 for q8: quantized from the file's bytes). */
  conversion: number;
  /** The most held at once: the sum of the above. */
  peak: number;
  /** What this build can address (4 GiB single-threaded, less with threads), or null. */
  limit: number | null;
}


/** See LoadOptions.onBackendChange. */
export interface BackendChange {
  backend: 'webgpu' | 'cpu';
  reason?: string;
}

/** The model's shape, from its config.json. */
export interface ModelConfig {
  nLayer: number;
  nHead: number;
  nEmbd: number;
  /** Context length: prompt plus generated tokens never exceed this. */
  nPositions: number;
  vocabSize: number;
  nParams: number;
  /** The end-of-text token (50256 for GPT-2). */
  eosTokenId: number;
}

/** One candidate of the distribution the sampler drew from. */
export interface Candidate {
  id: number;
  text: string;
  prob: number;
}

/** One generated token, delivered the moment it exists. */
export interface TokenEvent {
  /** Token id. */
  id: number;
  /** With `n` > 1: the choice this token belongs to (0 … n − 1). */
  choice?: number;
  /**
   * The text this token completes: whole UTF-8 characters only, so it may be '' (a token that ends
   * mid-character, the end-of-text token, or text held back because it may start a stop sequence).
   * The texts of all events concatenate to the result's `text`.
   */
  text: string;
  /** 0 for the first generated token. */
  index: number;
  /** Milliseconds since generation started in the worker (the first token's is the TTFT). */
  elapsedMs: number;
  /** A draft token the model kept (`draft` option): it came in the same model step as the token before it. */
  drafted: boolean;
  /** With `topLogprobs: k`: the sampler's k most likely candidates after temperature/top-k/top-p/min-p, most likely first. */
  top?: Candidate[];
  /** With `topLogprobs: k`: the probability this token had in that distribution (greedy: the softmax at temperature 1), whether or not it is among `top`. */
  prob?: number;
}

/** generate()'s options: the engine's (EngineOptions, above) and two of the API's own. */
export interface GenerateOptions extends EngineOptions {
  /** Resolves with stopReason 'abort' within one token of the signal firing. */
  signal?: AbortSignal;
  /** Called exactly once per generated token, in order, as soon as it exists, never batched. If it throws, generation stops and generate() rejects with that error. */
  onToken?: (token: TokenEvent) => void;
}

/** A finished beam of beam search. */
export interface Beam {
  /** Its generated ids, a final end-of-text included. */
  tokens: number[];
  /** Its text, without end-of-text, cut before a stop text. */
  text: string;
  /** Its total log-probability. */
  logprob: number;
  /** logprob / length ^ lengthPenalty: the ranking, best first. */
  score: number;
}

/** Where the CPU's forward passes spent their time, in milliseconds. The phases add up to totalMs. */
export interface Phases {
  calls: number;
  tokens: number;
  totalMs: number;
  /** Milliseconds in each phase; they add up to totalMs. */
  phases: { matmul: number; quantize: number; attention: number; gelu: number; layer_norm: number; lm_head: number };
  /** How many times each phase ran (a q8 product is one quantize and one matmul; f32 has no quantize). */
  laps: { matmul: number; quantize: number; attention: number; gelu: number; layer_norm: number; lm_head: number };
}

/** Timings, all measured inside the worker with performance.now() from the start of generation. */
export interface Metrics {
  /** Time to first token: tokenize + prefill (the whole prompt) + sampling the first token. */
  ttftMs: number;
  /** Mean time per output token after the first. */
  tpotMs: number;
  /** Median time per output token after the first. */
  tpotP50Ms: number;
  /** 95th percentile of the time per output token after the first. */
  tpotP95Ms: number;
  /** Start to end: ≈ ttftMs + tpotMs × (outputTokens − 1). */
  totalMs: number;
  /** The prompt's forward pass alone. */
  prefillMs: number;
  promptTokens: number;
  outputTokens: number;
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** Forward passes of the model: outputTokens without a draft, fewer when drafts are kept, one per beam per step with beams. */
  targetForwards: number;
  /** Tokens the drafter proposed, and how many of them the model kept. */
  draftedTokens: number;
  acceptedDraftTokens: number;
  /** The most generations this one shared a forward pass with, itself included (concurrent calls on one model run in one batch); 1 alone. */
  batchSize: number;
  /** Prompt tokens whose keys and values an earlier generation on this model had computed (prefix caching, `prefixCache`): reused, not run; `prefillTokensPerSec` counts the others. */
  cachedPromptTokens: number;
  /**
   * On WebGPU: what the forward passes that gave this generation its tokens asked of the GPU,
   * summed (a pass a batch shared counts whole for each of its generations; after a fall-back to
   * the CPU, the passes that ran on the GPU before it). Divided by `passes`,
   * a step's queue submissions (1), compute dispatches, and bytes read back: 4 per sequence when
   * greedy, the vocabulary's logits when sampling. `ahead`: the passes of them submitted before the
   * pass before them was read back, their ids copied on the GPU (greedy: every decode step but the
   * first, while the members of the batch stay the same). Absent on the CPU, and with beams or a
   * draft.
   */
  gpu?: { passes: number; submissions: number; dispatches: number; readbackBytes: number; ahead: number };
  /**
   * With `draft: 'mtp'`: whether the heads drafted, and whether they pay in this browser. The first
   * greedy such generations measure it (sampled ones always draft: a seed's text must not depend on it) — blocks of drafted steps alternate with blocks of plain ones (the
   * same tokens either way) and are timed — and the verdict is kept in localStorage per model,
   * build, threads, backend and dtype. `ran`: 'drafted' (the heads on, or `forceDraft`), 'plain'
   * (measured to be slower here: the plain loop ran, `draftedTokens` 0) or 'measuring'.
   */
  mtp?: {
    ran: 'drafted' | 'plain' | 'measuring';
    forced: boolean;
    verdict: null | {
      /** Whether `draft: 'mtp'` drafts (its drafted tokens came ≥ 1.1× as fast as plain ones). */
      on: boolean;
      plainMsPerToken: number;
      draftedMsPerToken: number;
      /** plainMsPerToken ÷ draftedMsPerToken. */
      speedup: number;
      /** Forward passes timed. */
      forwards: number;
      why: string;
      /** Measured on an earlier visit, not now. */
      remembered: boolean;
    };
  };
}

export interface GenerateResult {
  /** The generated text (without the prompt and without a matched stop text). */
  text: string;
  /** Generated token ids, including a final end-of-text token or the token that completed a stop text. */
  tokens: number[];
  stopReason: StopReason;
  metrics: Metrics;
  /** With `profile: true` on the CPU: the first forward pass (the prompt's) and every later one (the steps': a verification pass or a beam step is one call of several rows), apart. */
  profile?: { prompt: Phases; decode: Phases };
  /** With `numBeams` > 1: every finished beam, best (this result's text) first. */
  beams?: Beam[];
  /** With `n` > 1: every choice, generated as one batch; choice i is the generation with seed + i (choice 0 is also this result's own text and tokens). */
  choices?: Choice[];
}

/** One of the `n` choices of a generation. */
export interface Choice {
  index: number;
  text: string;
  tokens: number[];
  stopReason: StopReason;
  /** Null for a choice aborted before it ran. */
  metrics: Metrics | null;
}

/**
 * What a rejected promise of this API holds: an `Error` whose message is a sentence for a person,
 * and, when the engine or the worker knows it, the kind of failure as `code`.
 */
export interface Gpt2Error extends Error {
  code?: Gpt2ErrorCode;
}

/** A GPT-2 model running in a Web Worker. */
export declare class Gpt2 {
  private constructor();

  /**
   * Downloads (or reads) a model and builds it in the worker. Rejects with an Error whose message
   * says what failed, e.g. "could not load the model: could not download https://…/config.json:
   * the server answered 404 Not Found". All models of a page share one worker.
   *
   * Loading the same folder URL with the same backend again (while an earlier handle is not yet
   * disposed) downloads nothing: it returns a new handle to the same model in the worker. The model
   * is freed when its last handle is disposed. Files given as bytes are never shared.
   */
  static load(options?: LoadOptions): Promise<Gpt2>;

  /** What actually runs: 'webgpu' or 'cpu'. Changes to 'cpu' (during a generation) if the GPU is lost. */
  readonly backend: 'webgpu' | 'cpu';
  /** The weight format in use: 'q8' or 'f32' on the CPU, 'q8', 'f32' or 'f16' on WebGPU. */
  readonly dtype: Dtype;
  /** Threads the CPU engine runs on (1 unless the page is cross-origin isolated). */
  readonly threads: number;
  /** Which wasm build runs: 'pkg' (simd128), 'pkg-relaxed' (+ relaxed SIMD) or 'pkg-threads' (+ atomics). */
  readonly build: 'pkg' | 'pkg-relaxed' | 'pkg-threads';
  /**
   * The CPU's 8-bit kernel in the worker at load: 'dot-add', 'dot-i16' or 'widen' (see
   * LoadOptions.kernel), or "A (prompt), B (decode)" when timing chose two.
   */
  readonly kernel: string;
  /**
   * What was timed to choose the 8-bit kernel ("decode: dot-i16 21.0 µs, widen 25.3 µs; prompt: …;
   * a decode step of this model: dot-i16 14.60 ms, widen 9.10 ms": a matrix in the L2 cache for
   * the prompt's kernel, the model's own decode steps for a step's), or null where nothing was.
   * Timed once per browser and build (remembered in localStorage with the user agent and core
   * count; then the sentence ends "(timed on an earlier load in this browser)").
   */
  readonly kernelTimes: string | null;
  /** The GPU adapter in words while on WebGPU (e.g. "google swiftshader (WebGPU, a software fallback adapter)"), else undefined. */
  readonly adapter: string | undefined;
  /**
   * How the GPU's 8-bit kernels take their products while on WebGPU with q8 weights:
   * 'dot4I8Packed' (four weights per integer dot product: the browser's WGSL has
   * packed_4x8_integer_dot_product) or 'bytes' (a weight at a time, where it has not); else
   * undefined. Either gives the CPU's q8 greedy tokens on the demo model.
   */
  readonly gpuKernel: 'dot4I8Packed' | 'bytes' | undefined;
  /**
   * Why the model runs on the CPU although WebGPU was possible: 'auto' found no usable adapter
   * (none, a software one, or limits too small), or the GPU was lost. Undefined otherwise.
   */
  readonly gpuUnavailable: string | undefined;
  /**
   * A model from another origin is kept in the Cache API for the next visit (checked by size and
   * checksum when read back). Where it could not be (the storage quota full, storage refused as in
   * some private modes, a write cut off), the sentence that says so and that it will be downloaded
   * again next time; null when it was kept, came from the cache, or is never cached (the page's
   * own origin, files given as bytes).
   */
  readonly notCached: string | null;
  readonly config: Readonly<ModelConfig>;
  /** The model folder's URL, or the weights file's name for local files. */
  readonly name: string;

  /**
   * Generates a continuation of `prompt` (an empty prompt starts from end-of-text).
   *
   * Concurrency: a second generate() on the same model while one runs is QUEUED and starts when
   * the first ends; aborting a queued request resolves it at once with stopReason 'abort' and no
   * tokens. An already-aborted signal resolves at once the same way.
   *
   * Rejects with an Error sentence for invalid options (unknown names, wrong types, out-of-range
   * values such as a negative temperature), a prompt longer than the context, a disposed model,
   * or a failure inside the engine.
   */
  generate(prompt: string, options?: GenerateOptions): Promise<GenerateResult>;

  /**
   * One generation as an async iterator of its token events (the same as onToken's):
   *
   *     const s = model.stream('ROMEO:', { maxTokens: 40 });
   *     for await (const t of s) out.append(t.text);
   *     const r = await s.result;
   *
   * Leaving the loop early (`break`, `return`, a throw) aborts the generation, and `result` then
   * resolves with stopReason 'abort'. An error (bad options, a prompt too long) rejects both the
   * loop's next step and `result`. Options as generate's, without onToken.
   */
  stream(prompt: string, options?: Omit<GenerateOptions, 'onToken'>): TokenStream;

  /** Token ids of `text` under this model's tokenizer. */
  tokenize(text: string): Promise<number[]>;

  /**
   * The next-token logits after `ids`: a score for every token of the vocabulary
   * (`config.vocabSize` of them), to write the loop yourself:
   *
   *     const ids = await model.tokenize('ROMEO:');
   *     for (let i = 0; i < 20; i++) {
   *       const next = argmax(await model.logits(ids));   // predict, pick
   *       ids.push(next);                                 // append
   *       if (next === model.eosTokenId) break;
   *     }
   *     await model.decode(ids);
   *
   * Greedy, that loop gives exactly generate()'s tokens with temperature 0. `cache: true` (the
   * default) keeps the KV cache of the longest common prefix of `ids` and the last call's ids and
   * runs only the rest (one position per step in the loop above); `false` runs the whole sequence
   * every call, as the lesson's naive loop. A generate() in between empties that cache (the next
   * call runs everything). Calls wait behind the model's running generations. Rejects (code
   * 'param') for ids that are not token ids, an empty list, and (code 'prompt_too_long') more
   * ids than `config.nPositions`. The call's time: `lastCall`.
   */
  logits(ids: ArrayLike<number>, options?: { cache?: boolean }): Promise<Float32Array>;

  /**
   * The last logits() call's timings: `ms` from the call to its answer (what a loop measures),
   * `engineMs` the forward pass in the worker, `positions` the positions it ran, `reused` those
   * taken from the KV cache. null before the first call.
   */
  readonly lastCall: Readonly<{ ms: number; engineMs: number; positions: number; reused: number }> | null;

  /** The text of token ids (a character whose bytes the ids split shows as U+FFFD). */
  decode(ids: ArrayLike<number>): Promise<string>;

  /** The end-of-text token's id (`config.eosTokenId`). */
  readonly eosTokenId: number;
  /** The model's multi-token prediction heads (a GGUF file's `mtp.*` tensors), for `draft: 'mtp'`; null without. */
  readonly mtpHeads: { heads: number; draftVocab: number } | null;
  /**
   * What `backend: 'auto'` measured when it raced a hardware GPU against the CPU (a 16-token
   * prompt and 8 steps on each, the GPU's logits checked against the CPU's): the milliseconds,
   * the largest logit difference as a share of their range (above 0.001 with f32 weights on both,
   * 0.05 with q8 or f16, the GPU is not trusted),
   * the backend chosen and why. Null without a race. `cpuMs` and `logitDiff` are null when the
   * CPU copy did not fit beside the GPU's (then the GPU stays). When the CPU won, later loads of
   * the model in the same dtype in this browser go straight to the CPU (localStorage) and report
   * the earlier race with `remembered: true`; a GPU that won is raced again at every load.
   * `batch` is the number of sequences the race chose by: 1 in a page; a front end that runs many
   * at once (`gpt2 serve`) has both backends also time 8 steps of that many together
   * (`webgpuBatchMs`, `cpuBatchMs`, else null) and takes the faster per token there.
   */
  readonly backendTimes: { webgpuMs: number; cpuMs: number | null; batch: number; webgpuBatchMs: number | null; cpuBatchMs: number | null; logitDiff: number | null; chosen: 'webgpu' | 'cpu'; why: string; remembered?: true } | null;

  /**
   * OpenAI's (legacy) completions API on this model, so code written for an OpenAI-compatible
   * endpoint runs unchanged here. Differences: GPT-2 completes text, so there is no chat template
   * and no chat.completions; one prompt per call, `n` choices (1 to 16); `logprobs` up to 100
   * (OpenAI: 5); `echo` puts the prompt before each choice's text (not with logprobs); best_of, suffix, logit_bias and the presence and frequency penalties are refused unless at their
   * defaults; `model` and `user` are ignored; `seed` repeats a sampled text here, but not the text
   * another provider samples; llama.cpp's and vLLM's extensions `top_k`, `min_p`,
   * `repetition_penalty` and `ignore_eos` are taken; defaults as OpenAI's: max_tokens 16,
   * temperature 1, top_p 1.
   */
  readonly completions: Completions;

  /**
   * The worker's WebAssembly memory in bytes, shared by every model of the page (weights, KV
   * caches, buffers). It grows and never shrinks while the worker lives, so it is also the peak.
   * Also this model's `weights` and `kvCache` bytes, in the dtype it runs: allocated in that
   * memory on the CPU, in the device's buffers on WebGPU (`on`: 'cpu' or 'webgpu').
   */
  memory(): Promise<{ wasmBytes: number; weights: number; kvCache: number; on: 'cpu' | 'webgpu' }>;

  /** What this model was predicted to need on the CPU before it loaded (from config.json alone). */
  readonly plan: MemoryPlan;
  /**
   * When each phase of the load ended, in ms from its start in the worker: `engineMs` (the wasm
   * fetched, compiled and started), `configMs` (config.json, or a GGUF file's header, read),
   * `tokenizerMs` (the tokenizer built), `weightsMs` (the last weight converted), `warmUpMs` (the
   * warm-up generation done: the model is handed out). The phases overlap where they can (the
   * wasm compiles while the files download), so they are times, not durations. `startedMs`: when
   * the load started in the worker, in ms from the page's time origin (its navigation).
   */
  readonly loadTimings: Readonly<{ startedMs?: number; engineMs?: number; configMs?: number; tokenizerMs?: number; weightsMs?: number; warmUpMs?: number }>;

  /**
   * Frees this handle; its later calls reject. When it is the model's last handle, frees the model:
   * a running generation ends and rejects, queued ones reject.
   */
  dispose(): void;
}

/** What stream() returns: the token events, then the result. */
export interface TokenStream extends AsyncIterableIterator<TokenEvent> {
  /** The generation's result, once it has ended (stopReason 'abort' after a break). */
  readonly result: Promise<GenerateResult>;
}

export default Gpt2;

/** The parameters of `model.completions.create`, as OpenAI names them. */
export interface CompletionCreateParams {
  prompt: string | [string];
  /** Default 16. */
  max_tokens?: number;
  /** 0 to 2; default 1. 0 is greedy. */
  temperature?: number;
  /** Nucleus sampling; default 1. */
  top_p?: number;
  /** Generation ends before any of these texts (not included in the text). */
  stop?: string | string[] | null;
  seed?: number | null;
  stream?: boolean;
  /** With `include_usage: true`, a stream ends with a chunk of `usage` and no choices. */
  stream_options?: { include_usage?: boolean } | null;
  /** Choices: 1 to 16, generated as one batch; choice i samples with seed + i. Default 1. */
  n?: number;
  /**
   * With k (0 to 100; OpenAI takes 0 to 5), each choice's `logprobs` (CompletionLogprobs) has each
   * token's log probability and the k most likely candidates. Default null (each choice's is null).
   */
  logprobs?: number | null;
  /** The prompt before each choice's text (a stream's first chunk of each choice). Not with logprobs. Default false. */
  echo?: boolean | null;
  /**
   * gpt2-web's own: speculative decoding's drafter (the same text in fewer model steps; 'mtp'
   * needs a model with heads, `Gpt2.mtpHeads`). Not with n > 1. Default 'none'.
   */
  draft?: 'prompt-lookup' | 'mtp' | 'none';
  /** Extensions llama.cpp's server and vLLM accept too, as `generate`'s topK, minP, repetitionPenalty and ignoreEos. */
  top_k?: number | null;
  min_p?: number | null;
  repetition_penalty?: number | null;
  ignore_eos?: boolean | null;
  /** Ignored: the model is the loaded one. */
  model?: string;
  user?: string;
}

/**
 * OpenAI's legacy logprobs of a choice (or of a chunk's token), natural logs, one entry per
 * generated token: every token usage counts, so a final end-of-text token ('<|endoftext|>') and the
 * tokens of a matched stop text are there though not in `text`. Probabilities are of the
 * distribution the sampler drew from (after temperature and top_p; greedy: the softmax at
 * temperature 1).
 */
export interface CompletionLogprobs {
  /** Each token's own string (bytes of a character split across tokens show as U+FFFD). */
  tokens: string[];
  token_logprobs: number[];
  /**
   * The `logprobs` most likely candidates by their string, and always the picked token (so up to
   * logprobs + 1 entries; logprobs 0: just it). Of candidates with the same string, the more likely
   * keeps the key.
   */
  top_logprobs: Record<string, number>[];
  /**
   * Where each token's string starts: the length of the choice's strings before it (in a stream,
   * its earlier chunks' too). Where the strings concatenate to `text`, the token's place in it.
   */
  text_offset: number[];
}

export interface CompletionChoice {
  text: string;
  /** The choice (0 … n − 1). */
  index: number;
  /** With the `logprobs` parameter (a finishing chunk's are empty); else null. */
  logprobs: CompletionLogprobs | null;
  /** 'stop' for end-of-text or a stop text; 'length' for max_tokens or the context; null in a stream until the last chunk. */
  finish_reason: 'stop' | 'length' | null;
}

export interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** One result, or one chunk of a stream (then `choices[0].text` is one token's text). */
export interface Completion {
  id: string;
  object: 'text_completion';
  /** Unix seconds. */
  created: number;
  /** The loaded model's name. */
  model: string;
  choices: CompletionChoice[];
  usage?: CompletionUsage;
}

/** A streamed completion: one chunk per generated token, then one with finish_reason. */
export interface CompletionStream extends AsyncIterableIterator<Completion> {
  /** Aborts the generation: the loop then ends with an AbortError. */
  readonly controller: AbortController;
}

export interface Completions {
  create(body: CompletionCreateParams & { stream: true }, options?: { signal?: AbortSignal }): Promise<CompletionStream>;
  create(body: CompletionCreateParams & { stream?: false }, options?: { signal?: AbortSignal }): Promise<Completion & { usage: CompletionUsage }>;
}

/** The index of the largest logit: greedy decoding's pick. */
export function argmax(logits: ArrayLike<number>): number;
/** Probabilities from logits at `temperature` (default 1; 0 puts everything on the argmax). */
export function softmax(logits: ArrayLike<number>, temperature?: number): Float32Array;
/** Only the k most likely tokens' probabilities, renormalised. */
export function topK(probs: ArrayLike<number>, k: number): Float32Array;
/** Only the smallest set of most likely tokens whose probabilities reach p, renormalised. */
export function topP(probs: ArrayLike<number>, p: number): Float32Array;
/** Only the tokens at least p × the most likely one's probability, renormalised. */
export function minP(probs: ArrayLike<number>, p: number): Float32Array;
/** The repetition penalty on logits: each distinct id of `history` divided by `penalty` when positive, multiplied when not. */
export function penalize(logits: ArrayLike<number>, history: readonly number[], penalty: number): Float32Array;
/** generate()'s distribution for these logits, settings and ids so far: penalty, temperature (< 1e-4: greedy, one-hot), top-k, top-p, min-p. */
export function distribution(
  logits: ArrayLike<number>,
  settings?: Pick<GenerateOptions, 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty'>,
  history?: readonly number[],
): Float32Array;
/** The entropy of a distribution in bits. */
export function entropy(probs: ArrayLike<number>): number;
/** A token drawn from `probs` with `random` (default Math.random). */
export function sample(probs: ArrayLike<number>, random?: () => number): number;
/** A seeded generator of uniform numbers in [0, 1). Not the engine's sampler: seeds give other texts than generate()'s. */
export function rng(seed?: number): () => number;

/** A preset: the lesson's settings for one use, and why they suit it. */
export interface Preset {
  label: string;
  /** One sentence: why these settings suit the use. */
  why: string;
  /** generate() options to spread into your own: `{ ...PRESETS.autocomplete.options, signal }`. */
  options: Readonly<Pick<GenerateOptions, 'maxTokens' | 'temperature' | 'topK' | 'topP' | 'minP' | 'repetitionPenalty'> & { stop: readonly string[] }>;
}

/** autocomplete (greedy, 8 tokens, stop at a newline), creative (t 0.8, top-p 0.95, 160 tokens), extraction (greedy, 24 tokens, stop texts). */
export declare const PRESETS: Readonly<Record<'autocomplete' | 'creative' | 'extraction', Preset>>;


/** Whether `model` is a Hugging Face model id (`owner/name`) rather than a URL. */
export function isHubId(model: unknown): boolean;
/** The URL a Hub id resolves to: the folder, or a GGUF `file` of it. */
export function hubUrl(id: string, options?: { revision?: string; file?: string; hubHost?: string }): string;
/** 'https://huggingface.co' */
export const HUB_HOST: string;
