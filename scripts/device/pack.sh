#!/usr/bin/env bash
# Packs what the GPU machine lacks into .device/ (git-ignored; carried by the device tool):
# the local node binary, the node_modules the tests and the native build need, and the built
# TypeScript. The GPU machine has no Node.js, no npm and no registry.
#   bash scripts/device/pack.sh      then run scripts/device/run.sh there with carry [".device"]
#   DIFFUSERS_SRC=/work/diffusers-src/src bash scripts/device/pack.sh    packs diffusers' source too (BENCH=diffusion, lora)
#   BENCH_ONLY=1 bash scripts/device/pack.sh    without the test and docs tools (for TESTS=0 calls)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.device
rm -rf "$out" && mkdir -p "$out"
npm run build --silent >/dev/null
# node without its debug symbols (strip keeps the dynamic symbols addons link against), packed hard:
# the working tree and .device travel together within 64 MiB
stripped=$(mktemp) && cp "$(command -v node)" "$stripped" && strip "$stripped"
xz -T0 -9e -c "$stripped" > "$out/node.xz" && rm -f "$stripped"
# everything but the dev tools that only run here (linters, turbo, changesets) and the tokenizers
# binaries of other platforms (the machine is linux-x64 with glibc); typescript goes along: a test
# runs the generator of Tensor's op methods (scripts/gen-tensor-methods.mjs), which parses with it
# BENCH_ONLY=1 also leaves out what only the tests and the docs use (vitest, vite and its bundler,
# typescript, typedoc and what only they load; zeromq's musl builds; source maps, type declarations, READMEs), for a benchmark call (TESTS=0) when the working tree leaves less room
slim=()
[ "${BENCH_ONLY:-0}" = 1 ] && slim=(--exclude='node_modules/typescript' --exclude='node_modules/@rolldown' --exclude='node_modules/rolldown'
  --exclude='node_modules/vite' --exclude='node_modules/vitest' --exclude='node_modules/@vitest' --exclude='node_modules/typedoc'
  --exclude='node_modules/@shikijs' --exclude='node_modules/lightningcss*'
  --exclude='node_modules/@gerrit0' --exclude='node_modules/lunr' --exclude='node_modules/markdown-it' --exclude='node_modules/yaml'
  --exclude='node_modules/zeromq/build/linux/x64/node/musl-*'
  --exclude='*.map' --exclude='*.md' --exclude='*.d.ts' --exclude='*.d.mts' --exclude='*.d.cts')
tar -cJf "$out/node_modules.tar.xz" "${slim[@]}" \
  --exclude='node_modules/@turbo' --exclude='node_modules/turbo' \
  --exclude='node_modules/prettier' --exclude='node_modules/eslint*' --exclude='node_modules/@eslint*' \
  --exclude='node_modules/@typescript-eslint' --exclude='node_modules/typescript-eslint' \
  --exclude='node_modules/@changesets' --exclude='node_modules/@types' \
  --exclude='node_modules/tokenizers/tokenizers.darwin*' --exclude='node_modules/tokenizers/tokenizers.win32*' \
  --exclude='node_modules/tokenizers/tokenizers.android*' --exclude='node_modules/tokenizers/tokenizers.linux-arm*' \
  --exclude='node_modules/tokenizers/tokenizers.linux-x64-musl*' \
  --exclude='node_modules/zeromq/build/darwin' --exclude='node_modules/zeromq/build/win32' --exclude='node_modules/zeromq/build/linux/arm64' \
  node_modules
tar -cJf "$out/dist.tar.xz" packages/*/dist
# diffusers' source for BENCH=diffusion (no diffusers wheel there), when DIFFUSERS_SRC names the
# folder holding the diffusers package: DIFFUSERS_SRC=/work/diffusers-src/src bash scripts/device/pack.sh
if [ -n "${DIFFUSERS_SRC:-}" ]; then
  [ -f "$DIFFUSERS_SRC/diffusers/__init__.py" ] || { echo "pack.sh: no diffusers package under DIFFUSERS_SRC=$DIFFUSERS_SRC" >&2; exit 1; }
  tar -cJf "$out/diffusers-src.tar.xz" --exclude='__pycache__' -C "$(dirname "$DIFFUSERS_SRC")" "$(basename "$DIFFUSERS_SRC")"
fi
du -sh "$out"/*
echo "packed: $(du -sh "$out" | cut -f1) (the device tool carries at most 64 MiB with the working tree)"
