#!/usr/bin/env bash
# Sets up the transformers.js peer benchmark (idempotent; quick when already done):
#  - a Python venv for tools/peer/export_onnx.py at ${GPT2_PEER_VENV:-$HOME/.cache/gpt2-web/peer-venv}
#    (--system-site-packages, to reuse the installed torch 2.x) with optimum-onnx 0.1.0, which needs
#    transformers < 4.58, plus onnx and onnxruntime;
#  - tools/peer/node_modules from package-lock.json (@huggingface/transformers and @wllama/wllama,
#    pinned exactly; wllama's wasm ships inside its package).
#    Install scripts are skipped: only the browser bundle and onnxruntime-web's wasm files are used,
#    and onnxruntime-node's script would try to download binaries.
# `./build.sh bench --peer` runs it, then tools/peer/export_onnx.py and tools/bench_web.mjs --peer.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${GPT2_PEER_VENV:-$HOME/.cache/gpt2-web/peer-venv}"
REQS=(optimum-onnx==0.1.0 transformers==4.57.6 onnx==1.23.2 onnxruntime==1.32.0)

stamp="$VENV/.gpt2-peer-reqs"
if [[ -x "$VENV/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${REQS[*]}" ]]; then
  echo "peer venv: ok ($VENV)"
else
  echo "peer venv: creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -c 'import torch' 2>/dev/null || "$VENV/bin/pip" install --quiet torch
  "$VENV/bin/pip" install --quiet "${REQS[@]}"
  "$VENV/bin/python" -c 'import optimum.exporters.onnx, onnxruntime.quantization, transformers, onnx'
  echo "${REQS[*]}" > "$stamp"
fi

cd "$HERE"
if [[ -f node_modules/.package-lock.json && ! package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "peer node_modules: ok"
else
  echo "peer node_modules: npm ci"
  npm ci --ignore-scripts --no-audit --no-fund
fi
echo "peer: transformers.js $(node -p 'require("./node_modules/@huggingface/transformers/package.json").version'), onnxruntime-web $(node -p 'require("./node_modules/onnxruntime-web/package.json").version'), wllama $(node -p 'require("./node_modules/@wllama/wllama/package.json").version')"
echo "python: $VENV/bin/python"
