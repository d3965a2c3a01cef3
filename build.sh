#!/usr/bin/env bash
# gpt2-web's one entry point. Installs what it needs when it is missing, then:
#   ./build.sh [build]        wasm build into www/pkg/
#   ./build.sh serve [PORT]   build, then serve www/ on http://127.0.0.1:PORT (default 8080)
#   ./build.sh test           everything CI runs: fmt, clippy (native + wasm32), cargo test,
#                             the wasm build and the browser tests
#   ./build.sh bundle         build, then write dist/gpt2-demo.html: the page, the engine and the
#                             demo model in one file that works from disk (file://), no server
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
  if [ ! -d tests/e2e/node_modules/playwright-core ]; then
    say "installing the browser-test packages (npm)"
    (cd tests/e2e && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

build() {
  need_wasm_target
  need_wasm_bindgen
  say "building the wasm module (release, simd128)"
  cargo build --lib --release --target "$WASM_TARGET"
  wasm-bindgen --target web --no-typescript --out-dir www/pkg \
    "$CARGO_TARGET_DIR/$WASM_TARGET/release/gpt2_web.wasm"
  if command -v wasm-opt >/dev/null; then
    wasm-opt -O3 --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
      www/pkg/gpt2_web_bg.wasm -o www/pkg/gpt2_web_bg.wasm
  fi
  echo "www/pkg/gpt2_web_bg.wasm: $(du -h www/pkg/gpt2_web_bg.wasm | cut -f1)"
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
  apt_install chromium mesa-vulkan-drivers
  need_node_modules
  say "cargo fmt --check"
  cargo fmt --all -- --check
  say "cargo clippy (native)"
  cargo clippy --all-targets -- -D warnings
  say "cargo clippy (wasm32)"
  cargo clippy --lib --target "$WASM_TARGET" -- -D warnings
  say "cargo test"
  cargo test
  build
  say "browser tests (Chromium + Playwright)"
  (cd tests/e2e && node --test --test-concurrency=1 ./*.test.mjs)
}

cmd=${1:-build}
shift || true
case "$cmd" in
  build) build ;;
  serve) serve "$@" ;;
  test) run_tests ;;
  bundle) build; node tools/bundle.mjs "$@" ;;
  *) echo "usage: ./build.sh [build | serve [PORT] | test | bundle]" >&2; exit 2 ;;
esac
