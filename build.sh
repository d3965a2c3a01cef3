#!/usr/bin/env bash
# gpt2-web's one entry point. Installs what it needs when it is missing, then:
#   ./build.sh [build]        the wasm builds into www/pkg/, www/pkg-relaxed/, www/pkg-threads/, and
#                             www/worker.js joined from www/worker/*.js (tools/join_worker.mjs)
#   ./build.sh serve [PORT] [--isolated]
#                             build, then serve www/ on http://127.0.0.1:PORT (default 8080);
#                             --isolated sends COOP/COEP, so the page may run several threads
#   ./build.sh test           everything CI runs: fmt, clippy (native + wasm32), cargo test,
#                             the wasm build and the browser tests (Chromium, Firefox, WebKit)
#   ./build.sh bundle         build, then write dist/gpt2-demo.html: the page, the engine and the
#                             demo model in one file that works from disk (file://), no server
#   ./build.sh site           build, then write dist/site/: www/ for a static host, the release
#                             under v/<content hash>/ and the model under a hashed name (both
#                             immutable), with the headers in its _headers file (tools/site.mjs)
#   ./build.sh package        build, then write dist/gpt2-web-VERSION.tgz: the npm package (API,
#                             widget, worker, wasm builds; no model)
#   ./build.sh soak [N [M]]   build, then N generations in a row in Chromium (default 1000): memory
#                             must stay flat, no token event lost (./build.sh test runs 200); then
#                             M requests (default 5000) from five widgets at once in every engine
#                             (tests/e2e/load.test.mjs; ./build.sh test runs 500)
#   ./build.sh fuzz [SECONDS | --runs N] [TARGET...]  the loaders' fuzz targets (tools/fuzz,
#                             cargo-fuzz on nightly): each format's reader alone (weights_stream:
#                             safetensors and torch zip + pickle; gguf_header; shard_index;
#                             vocab_merges) and the whole loads (load_tokenizer, load_gguf,
#                             load_model), SECONDS (default 300) or N inputs each; prints the
#                             executions and any crash input
#   ./build.sh bench [--peer] the speed benchmark: native (and batching: `gpt2 bench --batch`,
#                             tools/bench_batch.mjs in Chromium), then headless Chromium, Firefox and
#                             WebKit (1 and 2 threads, q8 and f32; GPT2_BENCH_ENGINES=chromium
#                             narrows it); --peer adds transformers.js (ONNX) and wllama (GGUF)
#                             on the same weights;
#                             --no-vnni runs the browser part with V8's AVX-VNNI off (the CPUs
#                             without it, e.g. AMD Zen 4)
#   ./build.sh bench --serve  `gpt2 serve` under load: 64 streaming clients, 500 requests, against
#                             the same requests one at a time (tools/serve_load.mjs)
#   ./build.sh bench --cold   cold start: open → ready → first token, first and return visit, over
#                             loopback and throttled networks, for the page, a course page with the
#                             widget, transformers.js and wllama (tools/bench_cold.mjs)
#   ./build.sh bench --sizes  every GPT-2 size (124M to 1.5B, random weights of the real shapes):
#                             memory predicted vs measured, load time and TPOT, browser and native
#   ./build.sh gpu-check [--quick]  everything GPU-side in one go: native `gpt2 bench --backend
#                             webgpu` on the 124M/355M/774M/1.5B shapes beside the CPU, then Chromium
#                             with WebGPU on this machine's adapter beside its CPU path; fails when
#                             the native engine finds no adapter. --quick (./build.sh test, on
#                             lavapipe and SwiftShader): the demo model only
#   ./build.sh gpu-pack [DIR] / gpu-check --prebuilt DIR
#                             for a GPU machine with no Rust, browser or network: gpu-pack builds
#                             the release CLI and the GPU test binaries here into DIR (default
#                             .gpu); gpu-check --prebuilt DIR there runs those tests on its adapter,
#                             then the native rows (the demo model and the four shapes)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/gpt2-web/target}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
WASM_TARGET=wasm32-unknown-unknown

say() { printf '\n== %s\n' "$*"; }

need_wasm_target() {
  if ! rustup target list --installed | grep -qx "$WASM_TARGET"; then
    say "installing the $WASM_TARGET target"
    rustup target add "$WASM_TARGET"
  fi
}

# wasm-bindgen-cli must be exactly the wasm-bindgen version in Cargo.lock.
need_wasm_bindgen() {
  local want
  want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
  if [ -z "$want" ]; then
    cargo generate-lockfile
    want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
  fi
  if ! command -v wasm-bindgen >/dev/null || [ "$(wasm-bindgen --version | awk '{print $2}')" != "$want" ]; then
    say "installing wasm-bindgen-cli $want"
    cargo install wasm-bindgen-cli --version "$want" --force
  fi
}

apt_install() {
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

need_node_modules() {
  local pkg missing=0
  for pkg in playwright-core puppeteer-core selenium-webdriver axe-core vite; do
    [ -d "tests/e2e/node_modules/$pkg" ] || missing=1
  done
  if [ "$missing" = 1 ]; then
    say "installing the browser-test packages (npm)"
    (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# One wasm build: $1 = output folder under www/, $2 = extra RUSTFLAGS target features, the rest
# goes to cargo (e.g. +nightly, -Z build-std). Each build keeps its own target folder.
wasm_build() {
  local out=$1 features=$2 toolchain=$3
  shift 3
  local dir="$CARGO_TARGET_DIR/${out#pkg-}"
  [ "$out" = pkg ] && dir="$CARGO_TARGET_DIR" # with .cargo/config.toml's flags, shared with clippy
  say "building www/$out ($features)"
  RUSTFLAGS="-C target-feature=$features $WASM_LINK --cfg getrandom_backend=\"wasm_js\"" \
    CARGO_TARGET_DIR="$dir" cargo $toolchain build --lib --release --target "$WASM_TARGET" "$@"
  rm -rf "www/$out/snippets" # written afresh, so that tools/patch_rayon.mjs finds upstream's text
  # --remove-name-section: the function names (0.48 MB of 4.07; 0.09 MB of 1.03 with brotli) only
  # name frames in a wasm stack trace; panics carry their own message.
  wasm-bindgen --target web --no-typescript --remove-name-section --out-dir "www/$out" "$dir/$WASM_TARGET/release/gpt2_web.wasm"
  # wasm-bindgen-rayon's script for the threads, changed: its package imported by file, its
  # workers started by the page (tools/patch_rayon.mjs says why).
  for f in "www/$out"/snippets/wasm-bindgen-rayon-*/src/workerHelpers.js; do
    if [ -e "$f" ]; then node tools/patch_rayon.mjs "$f"; fi
  done
  echo "www/$out/gpt2_web_bg.wasm: $(du -h "www/$out/gpt2_web_bg.wasm" | cut -f1)"
}

# The nightly toolchain with rust-src, for the threaded build (std rebuilt with wasm atomics).
need_nightly() {
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  rustup component list --toolchain nightly --installed | grep -q '^rust-src' \
    || rustup component add rust-src --toolchain nightly
}

# Three builds; the worker picks one at load (www/worker.js):
#   pkg          simd128: every browser with WebAssembly SIMD
#   pkg-relaxed  + relaxed SIMD (8-bit dot products): Chromium-based browsers
#   pkg-threads  + wasm atomics and rayon's thread pool: cross-origin isolated pages
build() {
  # www/worker.js is made from its parts (www/worker/*.js): one script with no imports.
  node tools/join_worker.mjs
  need_wasm_target
  need_wasm_bindgen
  WASM_LINK="" wasm_build pkg +simd128 ""
  WASM_LINK="" wasm_build pkg-relaxed +simd128,+relaxed-simd ""
  need_nightly
  WASM_LINK="-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=2147483648 \
    -C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size -C link-arg=--export=__tls_align \
    -C link-arg=--export=__tls_base" \
    wasm_build pkg-threads +atomics,+bulk-memory,+mutable-globals,+simd128,+relaxed-simd +nightly \
    --features threads -Z build-std=panic_abort,std
}

serve() {
  build
  local port=${1:-8080}
  say "open http://127.0.0.1:$port/"
  exec node tools/serve.mjs --port "$port" --root www "${@:2}"
}

run_tests() {
  need_wasm_target
  for c in clippy rustfmt; do
    rustup component list --installed | grep -q "^$c" || rustup component add "$c"
  done
  apt_install chromium mesa-vulkan-drivers firefox-esr webkit2gtk-driver xvfb
  need_node_modules
  # tests/mtp.rs runs tools/train_mtp_heads.py for a few steps: numpy and safetensors.
  python3 -c 'import numpy, safetensors' 2>/dev/null || python3 -m pip install --quiet numpy safetensors
  say "cargo fmt --check"
  cargo fmt --all -- --check
  say "cargo clippy (native)"
  cargo clippy --all-targets -- -D warnings
  say "cargo clippy (wasm32)"
  cargo clippy --lib --target "$WASM_TARGET" -- -D warnings
  say "cargo test"
  cargo test
  build
  say "browser tests (Chromium, Firefox, WebKit)"
  (cd tests/e2e && node --test --test-concurrency=1 ./*.test.mjs)
  gpu_check --quick
}

# ./build.sh bench --serve [ARGS]: `gpt2 serve` under load (tools/serve_load.mjs; its flags pass
# through: --model DIR, --clients, --requests, --max-tokens, --json).
bench_serve() {
  cargo build --release --bin gpt2
  node tools/serve_load.mjs --bin "$CARGO_TARGET_DIR/release/gpt2" "$@"
}

# ./build.sh gpu-check [--quick]: the GPU check, made to run in one call on a machine lent with a
# GPU (under 8 minutes on one) and in CI on software adapters (lavapipe natively, SwiftShader in
# Chromium), so it cannot rot. Each native line: ms/token, TTFT, the submissions, dispatches and
# bytes read back per decode token and the adapter (gpt2 bench), then the CPU's q8 on the same
# model for the ratio.
gpu_check() {
  local quick=0 prebuilt="" bin models=() shape m lengths prompt batches t
  [ "${1:-}" = --quick ] && quick=1
  [ "${1:-}" = --prebuilt ] && prebuilt=${2:?gpu-check --prebuilt DIR: the folder ./build.sh gpu-pack wrote}
  if [ -n "$prebuilt" ]; then
    gpu_check_prebuilt "$prebuilt"
    return
  fi
  apt_install chromium mesa-vulkan-drivers
  need_node_modules
  if [ "$quick" = 1 ]; then
    cargo build --bin gpt2 # the test build's (dependencies optimised): the demo model needs no more
    bin="$CARGO_TARGET_DIR/debug/gpt2"
    models=(www/models/gpt2-shakespeare)
    lengths=8,32 prompt=16 batches=1,8
  else
    cargo build --release --bin gpt2
    bin="$CARGO_TARGET_DIR/release/gpt2"
    python3 -c 'import numpy, safetensors' 2>/dev/null || python3 -m pip install --quiet numpy safetensors
    for shape in gpt2 gpt2-medium gpt2-large gpt2-xl; do
      m="$HOME/.cache/gpt2-web/bench/$shape"
      [ -f "$m/model.safetensors" ] || python3 tools/make_random_checkpoint.py --shape "$shape" --out "$m"
      models+=("$m")
    done
    lengths=16,128 prompt=64 batches=1,4,16
  fi
  for m in "${models[@]}"; do
    say "gpu-check: $m on WebGPU (native)"
    "$bin" bench --model "$m" --backend webgpu --lengths "$lengths" --prompt-tokens "$prompt"
    say "gpu-check: $m on WebGPU, a batch's decode step: one submission, ≤ 8 bytes back per sequence"
    "$bin" bench --model "$m" --backend webgpu --batch "$batches" --tokens 8 --json | python3 tools/check_gpu_step.py --model "$m"
    say "gpu-check: $m on the CPU, q8 (native), for the ratio"
    "$bin" bench --model "$m" --backend cpu --dtype q8 --lengths "$lengths" --prompt-tokens "$prompt"
  done
  say "gpu-check: Chromium with WebGPU beside its CPU path"
  if [ "$quick" = 1 ]; then
    # SwiftShader takes seconds per token: a few tokens show that the path runs, not its speed.
    GPT2_WEBGPU_ADAPTER=swiftshader node tools/bench_web.mjs --model www/models/gpt2-shakespeare --engines chromium \
      --threads 1 --runs 1 --tokens 4 --webgpu --label 'the demo model (16 M parameters)'
  else
    node tools/bench_web.mjs --model "${models[0]}" --engines chromium --threads 1 --runs 3 --tokens 128 --webgpu
  fi
}

# ./build.sh gpu-pack [DIR]: what gpu-check --prebuilt runs, built here (x86-64 Linux, glibc of
# this machine or older there): the release CLI and the GPU test binaries, stripped. The tests read
# their fixtures from the checkout's path at build time, written beside them in manifest_dir.
gpu_pack() {
  local dir=${1:-.gpu} exe
  mkdir -p "$dir"
  cargo build --release --bin gpt2
  cp "$CARGO_TARGET_DIR/release/gpt2" "$dir/gpt2"
  for t in gpu_kernels gpu_model gpu_formats gpu_beam parity beam; do # parity, beam: each backend
    exe=$(cargo test --release --test "$t" --no-run --message-format=json 2>/dev/null |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])' | tail -1)
    cp "$exe" "$dir/test-$t"
  done
  strip "$dir"/gpt2 "$dir"/test-*
  xz -T0 -6 -f "$dir"/gpt2 "$dir"/test-* # a fifth of the size: the machine's copy of the tree is limited
  echo "$ROOT" > "$dir/manifest_dir"
  du -sh "$dir"
}

# gpu-check --prebuilt DIR, on the GPU machine: the GPU tests (CI=true: no adapter is a failure),
# then each model on WebGPU and on the CPU (q8; GPT2_GPU_ONLY=1 leaves the CPU out), a line per
# step, a step that fails said and the next one run (GPT2_GPU_MODELS narrows the models). The checkpoints of the four shapes are made there (numpy, safetensors).
gpu_check_prebuilt() {
  local dir=$1 home m shape failed=0
  home=$(cat "$dir/manifest_dir")
  if [ "$home" != "$ROOT" ] && [ ! -e "$home" ]; then mkdir -p "$(dirname "$home")"; ln -s "$ROOT" "$home"; fi
  step() { say "gpu-check: $*"; "$@" || { echo "gpu-check: FAILED (exit $?): $*"; failed=1; }; }
  for t in "$dir"/*.xz; do # python's lzma: the machine may have no xz
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3], "wb"))' "$t"
    chmod +x "${t%.xz}"
  done
  for t in "$dir"/test-*[^z]; do step env CI=true "$t" --test-threads=1; done
  for m in ${GPT2_GPU_MODELS:-www/models/gpt2-shakespeare gpt2 gpt2-medium gpt2-large gpt2-xl}; do
    if [ ! -e "$m" ]; then
      shape=$m m="$HOME/.cache/gpt2-web/bench/$shape"
      [ -f "$m/model.safetensors" ] || step python3 tools/make_random_checkpoint.py --shape "$shape" --out "$m"
    fi
    step "$dir/gpt2" bench --model "$m" --backend webgpu --lengths 16,128 --prompt-tokens 64
    # The batch table by dtype, with the per-step counters checked; q8 both ways its kernels
    # take their products (dot4I8Packed, and a weight at a time), and f32 with the reductions'
    # trees wholly in workgroup memory (no subgroup shuffles), to time each pair.
    for dtype in f32 f16 q8 "q8 --gpu-kernel bytes" "f32 --gpu-subgroups off"; do
      step bash -c '"$1" bench --model "$2" --backend webgpu --dtype $3 --batch 1,4,16 --tokens 32 --json |
        python3 tools/check_gpu_step.py --model "$2"' _ "$dir/gpt2" "$m" "$dtype"
    done
    [ "${GPT2_GPU_ONLY:-0}" = 1 ] || step "$dir/gpt2" bench --model "$m" --backend cpu --dtype q8 --lengths 16,128 --prompt-tokens 64
  done
  return "$failed"
}

# ./build.sh bench [--peer] [bench_web.mjs options]: the native lab, then the browser benchmark on
# a GPT-2-124M-shaped checkpoint with seeded random weights (made once, not committed).
bench() {
  local peer=0 sizes=0 cold=0 rest=()
  for a in "$@"; do
    if [ "$a" = --peer ]; then peer=1; elif [ "$a" = --sizes ]; then sizes=1; elif [ "$a" = --cold ]; then cold=1
    elif [ "$a" = --serve ]; then
      local args=() b
      for b in "$@"; do [ "$b" = --serve ] || args+=("$b"); done
      bench_serve ${args[@]+"${args[@]}"}
      return
    else rest+=("$a"); fi
  done
  apt_install chromium firefox-esr webkit2gtk-driver xvfb
  need_node_modules
  build
  if [ "$cold" = 1 ]; then
    # The peers load the demo model too: transformers.js as ONNX (exported once), wllama the same GGUF.
    bash tools/peer/setup.sh
    local venv=${GPT2_PEER_VENV:-$HOME/.cache/gpt2-web/peer-venv} onnx=$HOME/.cache/gpt2-web/bench/gpt2-shakespeare-onnx
    if [ ! -f "$onnx/onnx/model_quantized.onnx" ]; then
      "$venv/bin/python" tools/peer/export_onnx.py --model www/models/gpt2-shakespeare --out "$onnx"
    fi
    # wllama the page's Q8_0 blocks without the MTP heads, which it cannot load (bench_cold.mjs).
    local wgguf=$HOME/.cache/gpt2-web/bench/gpt2-shakespeare-wllama/gpt2-shakespeare-q8_0.gguf
    if [ ! -f "$wgguf" ]; then
      python3 -c 'import gguf' 2>/dev/null || python3 -m pip install --quiet gguf
      mkdir -p "$(dirname "$wgguf")"
      python3 tools/make_gguf.py --model www/models/gpt2-shakespeare --type Q8_0 --q7 --no-output --out "$wgguf"
    fi
    if [ ${#rest[@]} -gt 0 ]; then node tools/bench_cold.mjs --onnx "$onnx" --wllama-gguf "$wgguf" "${rest[@]}"; return; fi
    # Everything in Chromium over the site's layout; the page in Firefox and WebKit; the page
    # served from www/ as it is (what a course author who copies the folder gets).
    node tools/bench_cold.mjs --onnx "$onnx" --wllama-gguf "$wgguf"
    node tools/bench_cold.mjs --engines firefox,webkit --targets page --networks loopback,25:20 --repeat 3
    node tools/bench_cold.mjs --tree www --engines chromium,firefox --targets page --networks loopback,25:20 --repeat 3
    return
  fi
  if [ "$sizes" = 1 ]; then
    # Every GPT-2 size (random weights of the real shapes, ~11 GB under ~/.cache/gpt2-web/bench):
    # predicted and measured memory, load time and TPOT, in the browser and natively.
    python3 -c 'import numpy, safetensors' 2>/dev/null || python3 -m pip install --quiet numpy safetensors
    cargo build --release --bin gpt2
    node tools/bench_sizes.mjs ${rest[@]+"${rest[@]}"}
    return
  fi
  local model=${GPT2_BENCH_MODEL:-$HOME/.cache/gpt2-web/bench/gpt2-124m}
  if [ ! -f "$model/model.safetensors" ]; then
    say "making $model (random weights, GPT-2-124M shape)"
    python3 -c 'import numpy, safetensors' 2>/dev/null || python3 -m pip install --quiet numpy safetensors
    python3 tools/make_random_checkpoint.py --shape gpt2 --out "$model"
  fi
  say "native: gpt2 bench, one thread"
  cargo build --release --bin gpt2
  local lab bound bytes
  lab=$(mktemp)
  for dtype in q8 f32; do
    "$CARGO_TARGET_DIR/release/gpt2" bench --model "$model" --backend cpu --dtype "$dtype" \
      --lengths 16,64,128 --prompt-tokens 64 | tee "$lab.$dtype"
    echo
  done
  # Batching: B sequences per step against one, natively and in Chromium (tools/bench_batch.mjs).
  "$CARGO_TARGET_DIR/release/gpt2" bench --model "$model" --backend cpu --batch 1,2,4,8 --tokens 32
  node tools/bench_batch.mjs --model "$model"
  echo
  # More than one token per step: the demo model's drafters (prompt lookup, its heads), natively
  # and in Chromium, on tools/speculative_prompts.json.
  "$CARGO_TARGET_DIR/release/gpt2" bench --model www/models/gpt2-shakespeare --backend cpu --dtype q8 \
    --draft prompt-lookup,mtp --tokens 128
  node tools/bench_speculative.mjs --model www/models/gpt2-shakespeare --drafts prompt-lookup,mtp
  echo
  # The q8 bandwidth bound the lab printed, for the browser's decode to be measured against.
  bound=$(sed -n 's/.*bandwidth bound \([0-9.]*\) ms\/token.*/\1/p' "$lab.q8" | head -1)
  bytes=$(sed -n 's/.* \([0-9.]*\) MB of weights read per token.*/\1/p' "$lab.q8" | head -1)
  rm -f "$lab" "$lab.q8" "$lab.f32"
  [ -n "$bound" ] && rest=(--bound-ms "$bound" ${rest[@]+"${rest[@]}"})
  [ -n "$bytes" ] && rest=(--weights-mb "$bytes" ${rest[@]+"${rest[@]}"})
  local peer_args=()
  if [ "$peer" = 1 ]; then
    say "peer: transformers.js on the same weights (ONNX), and wllama (GGUF)"
    bash tools/peer/setup.sh
    local venv=${GPT2_PEER_VENV:-$HOME/.cache/gpt2-web/peer-venv}
    if [ ! -f "$model-onnx/onnx/model_quantized.onnx" ]; then
      "$venv/bin/python" tools/peer/export_onnx.py --model "$model" --out "$model-onnx"
    fi
    # wllama (llama.cpp) on the same weights as GGUF: Q8_0 against our q8, F32 against our f32.
    local t
    for t in Q8_0 F32; do
      if [ ! -f "$model-gguf/model-$t.gguf" ]; then
        python3 -c 'import gguf' 2>/dev/null || python3 -m pip install --quiet gguf
        mkdir -p "$model-gguf"
        python3 tools/make_gguf.py --model "$model" --type "$t" --no-output --out "$model-gguf/model-$t.gguf"
      fi
    done
    peer_args=(--peer --onnx "$model-onnx" --gguf "$model-gguf")
  fi
  say "browser: headless Chromium, Firefox and WebKit"
  node tools/bench_web.mjs --model "$model" --engines "${GPT2_BENCH_ENGINES:-chromium,firefox,webkit}" \
    ${peer_args[@]+"${peer_args[@]}"} ${rest[@]+"${rest[@]}"}
}

# ./build.sh fuzz [SECONDS | --runs N]: each fuzz target for SECONDS (or N inputs) from its seeds (tools/fuzz/seeds/) and the
# corpus it grew before (kept under the target folder). A crash leaves its input in
# tools/fuzz/artifacts/; minimise it (cargo fuzz tmin) into tests/fixtures/fuzz/<target>/.
fuzz() {
  local seconds=300 runs=-1 seeds
  if [ "${1:-}" = --runs ]; then runs=${2:?--runs N}; seconds=86400; shift 2
  elif [ $# -gt 0 ]; then seconds=$1; shift; fi
  local targets=("$@")
  [ ${#targets[@]} -gt 0 ] ||
    targets=(weights_stream gguf_header shard_index vocab_merges load_tokenizer load_gguf load_model)
  need_nightly
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
  local total=0
  for target in "${targets[@]}"; do
    local corpus="$CARGO_TARGET_DIR/fuzz-corpus/$target"
    mkdir -p "$corpus"
    case $target in # the fast readers start from the whole loaders' seeds
      weights_stream) seeds=load_model ;; gguf_header) seeds=load_gguf ;; *) seeds=$target ;;
    esac
    if [ "$runs" = -1 ]; then say "fuzzing $target for ${seconds}s"; else say "fuzzing $target for $runs inputs"; fi
    CARGO_TARGET_DIR="$CARGO_TARGET_DIR/fuzz" cargo +nightly fuzz run --fuzz-dir tools/fuzz "$target" \
      "$corpus" "tools/fuzz/seeds/$seeds" -- -max_total_time="$seconds" -runs="$runs" -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 2>&1 | tee "$CARGO_TARGET_DIR/fuzz-$target.log" | grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY)' || true
    local n
    n=$(awk '/stat::number_of_executed_units/ { print $2 }' "$CARGO_TARGET_DIR/fuzz-$target.log")
    total=$((total + ${n:-0}))
    if grep -q 'SUMMARY\|deadly signal\|panicked' "$CARGO_TARGET_DIR/fuzz-$target.log"; then
      echo "fuzz: $target crashed; the input is in tools/fuzz/artifacts/$target/" >&2
      exit 1
    fi
  done
  say "fuzz: $total executions, no crash"
}

cmd=${1:-build}
shift || true
case "$cmd" in
  build) build ;;
  serve) serve "$@" ;;
  test) run_tests ;;
  bundle) build; node tools/bundle.mjs "$@" ;;
  site) build; node tools/site.mjs "$@" ;;
  package) build; node tools/package.mjs "$@" ;;
  fuzz) fuzz "$@" ;;
  soak)
    apt_install chromium firefox-esr webkit2gtk-driver xvfb
    need_node_modules
    build
    (cd tests/e2e && GPT2_SOAK=${1:-1000} node --test soak.test.mjs &&
      GPT2_LOAD=${2:-5000} node --test --test-concurrency=1 load.test.mjs) ;;
  bench) bench "$@" ;;
  gpu-check) [ "${1:-}" = --prebuilt ] || build; gpu_check "$@" ;;
  gpu-pack) gpu_pack "$@" ;;
  *) echo "usage: ./build.sh [build | serve [PORT] [--isolated] | test | bundle | site | package | soak [N [M]] | fuzz [SECONDS | --runs N] [TARGET...] | bench [--peer | --cold | --sizes | --serve] | gpu-check [--quick | --prebuilt DIR] | gpu-pack [DIR]]" >&2; exit 2 ;;
esac
