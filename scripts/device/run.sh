#!/usr/bin/env bash
# On the GPU machine (through the device tool, carry [".device"]): unpack what pack.sh packed,
# build the addon against the machine's torch (CUDA and NCCL when that torch has them), run the
# test suites, and leave the logs and a JSON summary under $OUT.
#   bash scripts/device/run.sh [vitest filters...]
#   BENCH=overhead,redistribute,flux,overlap,hf,diffusion,pipelines,loragemm,loradown,matmultune,lora,fp8,qattention,cache,cachefp8,cachecheck,offload,serve also runs those benchmarks (JSON lines under $OUT); TESTS=0 skips the tests;
#   CE_REDUCTIONS=1 / NCCL_ONLY=1 add flux passes with copy-engine reductions / with NCCL only;
#   FLUX_AB="NAME=value" adds a pass (single, asynctp, ulysses) with that variable set, for an A/B in one call
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/dtorch-out}
mkdir -p "$OUT" /tmp/dtorch-bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 DTORCH_SKIP_SETUP=1 TURBO_TELEMETRY_DISABLED=1
xz -dc .device/node.xz > /tmp/dtorch-bin/node && chmod +x /tmp/dtorch-bin/node
export PATH=/tmp/dtorch-bin:$PATH
tar -xJf .device/node_modules.tar.xz
tar -xJf .device/dist.tar.xz
# diffusers' source, for the diffusers side of BENCH=diffusion (the machine has no diffusers wheel):
# .device/diffusers-src.tar.xz (pack.sh with DIFFUSERS_SRC set) unpacked to /tmp/diffusers-src;
# DIFFUSERS_SRC names the folder holding the diffusers package
if [ -f .device/diffusers-src.tar.xz ]; then
  rm -rf /tmp/diffusers-src && mkdir -p /tmp/diffusers-src && tar -xJf .device/diffusers-src.tar.xz -C /tmp/diffusers-src
  init=$(find /tmp/diffusers-src -maxdepth 4 -path '*/diffusers/__init__.py' | head -1)
  [ -n "$init" ] && export DIFFUSERS_SRC=$(dirname "$(dirname "$init")") && echo "diffusers source: $DIFFUSERS_SRC"
fi
prefix=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.utils.cmake_prefix_path)))')
version=$(python3 -c 'import torch; print(torch.__version__)')
cuda=$(python3 -c 'import torch; print(str(torch.cuda.is_available()).lower())')
mkdir -p .dtorch
printf '{"cmakePrefixPath":"%s","version":"%s","cuda":%s,"source":"device python3"}\n' "$prefix" "$version" "$cuda" > .dtorch/torch.json
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
start=$(date +%s)
node scripts/build-native.mjs > "$OUT/build.log" 2>&1
build=$?
cuda_nccl=$([ "$cuda" = true ] && echo 1 || echo 0)
grep -E "dtorch: (NCCL|LibTorch)" "$OUT/build.log" | head -3
echo "build exit $build in $(( $(date +%s) - start )) s" | tee -a "$OUT/build.log"
results=()
if [ $build -eq 0 ]; then
  [ "${TESTS:-1}" = 0 ] || for dir in packages/common packages/external packages/core packages/api packages/nn packages/hf tests; do
    name=$(basename "$dir")
    (cd "$dir" && DTORCH_EXPECT_NCCL=$cuda_nccl node "$root/node_modules/vitest/vitest.mjs" run "$@" --reporter=default --reporter=json --outputFile="$OUT/vitest-$name.json") > "$OUT/test-$name.log" 2>&1
    results+=("\"$name\": $?")
  done
fi
if [ $build -eq 0 ] && [ "$cuda" = true ] && [ "${TESTS:-1}" != 0 ]; then
  # the property suites again, on CUDA meshes: sharded ops and collectives across GPUs
  (cd tests && DTORCH_PROPERTY_DEVICE=cuda node "$root/node_modules/vitest/vitest.mjs" run distributed/redistribute distributed/ops "$@" --reporter=default) > "$OUT/test-cuda-property.log" 2>&1
  results+=("\"cuda-property\": $?")
  # again with every collective through NCCL (no copy-engine all-gather / all-to-all)
  (cd tests && DTORCH_COPY_ENGINES=0 DTORCH_PROPERTY_DEVICE=cuda node "$root/node_modules/vitest/vitest.mjs" run distributed/redistribute distributed/ops distributed/collective distributed/loop_memory "$@" --reporter=default) > "$OUT/test-cuda-property-nccl.log" 2>&1
  results+=("\"cuda-property-nccl\": $?")
fi
bench() { [ $build -eq 0 ] && [[ ",${BENCH:-}," == *",$1,"* ]]; }
if bench overhead; then
  [ "$cuda" = true ] && DEVICE=cuda node bench/overhead/run.mjs > "$OUT/overhead-cuda.jsonl" 2>&1
  node bench/overhead/run.mjs > "$OUT/overhead-cpu.jsonl" 2>&1
fi
bench redistribute && node bench/redistribute/run.mjs > "$OUT/redistribute-cpu.jsonl" 2>&1
if bench flux && [ "$cuda" = true ]; then
  DEVICE=cuda node bench/gpu/flux_block.mjs > "$OUT/flux-block-cuda.jsonl" 2>&1
  # reductions as copy-engine pulls plus an add, instead of NCCL kernels that wait for the SMs
  [ "${CE_REDUCTIONS:-0}" = 1 ] && DEVICE=cuda VARIANTS=tp,tpsp CARVEOUTS=0 DTORCH_COPY_ENGINE_REDUCTIONS=1 node bench/gpu/flux_block.mjs > "$OUT/flux-block-cuda-ce-reductions.jsonl" 2>&1
  [ -n "${FLUX_AB:-}" ] && env "$FLUX_AB" DEVICE=cuda VARIANTS=single,asynctp,ulysses CARVEOUTS=0 node bench/gpu/flux_block.mjs > "$OUT/flux-block-cuda-ab.jsonl" 2>&1
  [ "${NCCL_ONLY:-0}" = 1 ] && DEVICE=cuda VARIANTS=tp,ulysses CARVEOUTS=0 DTORCH_COPY_ENGINES=0 node bench/gpu/flux_block.mjs > "$OUT/flux-block-cuda-nccl-only.jsonl" 2>&1
fi
if bench overlap && [ "$cuda" = true ]; then
  DEVICE=cuda CARVEOUTS=0,16 node bench/gpu/overlap.mjs > "$OUT/overlap-cuda.jsonl" 2>&1
  DEVICE=cuda CARVEOUTS=0,16,32 DTORCH_COPY_ENGINES=0 node bench/gpu/overlap.mjs > "$OUT/overlap-cuda-nccl-only.jsonl" 2>&1
fi
if bench hf && [ "$cuda" = true ]; then
  # T5-XXL, CLIP-L and CLIP-G text encoders beside transformers eager and compiled (HF_MODELS: a subset; QUANTIZE=fp8 adds FP8 DTorch)
  DEVICE=cuda MODELS=${HF_MODELS:-t5-xxl,clip-l,clip-g} node bench/hf/text_encoders.mjs > "$OUT/hf-text-encoders-cuda.jsonl" 2>&1
fi
if bench pipelines && [ "$cuda" = true ]; then
  # Flux-dev and SD3-medium text to image end to end (28 steps, 1024x1024) beside diffusers' pipelines
  DEVICE=cuda PIPELINES=${PIPELINES:-flux-dev,sd3-medium} node bench/hf/pipelines.mjs > "$OUT/hf-pipelines-cuda.jsonl" 2>&1
fi
if bench diffusion && [ "$cuda" = true ]; then
  # FLUX.1-dev's and SD3-medium's transformers (one step) and the SD3/Flux VAE decode beside
  # diffusers eager and compiled (DIFFUSION_MODELS: a subset; COMPILE, BUDGET_S, ITERS pass through)
  if [ -z "${DIFFUSERS_SRC:-}" ]; then echo "BENCH=diffusion: no diffusers source (.device/diffusers-src.tar.xz); the diffusers side will fail"; fi
  DEVICE=cuda MODELS=${DIFFUSION_MODELS:-flux-dev,sd3-medium,vae-decode} node bench/hf/diffusion_models.mjs > "$OUT/hf-diffusion-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"done":true' -e '"error"' "$OUT/hf-diffusion-cuda.jsonl" | cut -c1-900
fi
if bench fp8 && [ "$cuda" = true ]; then
  # FP8 linears beside bfloat16 at Flux's shapes (issue 44): time, ratio, error
  DEVICE=cuda node bench/gpu/fp8_linear.mjs > "$OUT/fp8-linear-cuda.jsonl" 2>&1
  cat "$OUT/fp8-linear-cuda.jsonl" | cut -c1-400
  # Flux-dev's step in FP8 against bfloat16: time, memory, kernels, one-step and 28-step error
  DEVICE=cuda node bench/hf/fp8_step.mjs > "$OUT/hf-fp8-step-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e 'rror' "$OUT/hf-fp8-step-cuda.jsonl" | cut -c1-1500
fi
if bench qattention && [ "$cuda" = true ]; then
  # quantized attention recipes (Triton: FP8, SageAttention2, SageAttention1) against cuDNN's bfloat16 attention at Flux-dev's shape (issue 44)
  (cd bench/gpu && python3 quantized_attention.py) > "$OUT/quantized-attention-cuda.jsonl" 2>&1
  grep -h -e '"summary": true' -e '"error"' "$OUT/quantized-attention-cuda.jsonl" | cut -c1-1500
fi
if bench loragemm && [ "$cuda" = true ]; then
  # the matmuls a LoRA adds to Flux-dev's linears, each way of running them, shape by shape (PyTorch)
  for r in $(echo "${RANKS:-16}" | tr , " "); do python3 bench/gpu/lora_gemms.py --rank "$r" > "$OUT/lora-gemms-r$r-cuda.jsonl" 2>&1; done
  grep -h -e '"summary": true' -e 'rror' "$OUT"/lora-gemms-r*-cuda.jsonl | cut -c1-1500
fi
if bench loradown && [ "$cuda" = true ]; then
  # A x of an unfused LoRA: cuBLAS against a skinny tensor-core kernel of our own, shape by shape (PyTorch, one inline extension)
  (cd bench/gpu && python3 lora_down.py) > "$OUT/lora-down-cuda.jsonl" 2>&1
  grep -h -e '"summary": true' -e 'rror' "$OUT/lora-down-cuda.jsonl" | cut -c1-1500
fi
if bench matmultune && [ "$cuda" = true ]; then
  # the timed matmuls against LibTorch's kernel choice at Flux-dev's (LoRA-widened) linears
  DEVICE=cuda node bench/gpu/matmul_tuning.mjs > "$OUT/matmul-tuning-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/matmul-tuning-cuda.jsonl" | cut -c1-1200
fi
if bench lora && [ "$cuda" = true ]; then
  # LoRA on Flux-dev's transformer (issue 42): unfused overhead, fuse, load, memory, beside diffusers + PEFT (RANKS; VARIANTS: DTorch's side once per setting)
  DEVICE=cuda node bench/hf/lora.mjs > "$OUT/hf-lora-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/hf-lora-cuda.jsonl" | cut -c1-1200
fi
if bench cache && [ "$cuda" = true ]; then
  # First-Block Cache and TaylorSeer on Flux-dev end to end (issue 46): thresholds and step targets (CACHES) beside diffusers' hooks
  DEVICE=cuda PIPELINES=${PIPELINES:-flux-dev} CACHES=${CACHES:-0.12,0.08,steps=14,steps=10,taylorseer:5} node bench/hf/pipelines.mjs > "$OUT/hf-cache-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/hf-cache-cuda.jsonl" | cut -c1-2500
fi
if bench cachecheck && [ "$cuda" = true ]; then
  # First-Block Cache at fixed thresholds on both sides (CACHES_CHECK): do both compute the same calls?
  DEVICE=cuda PIPELINES=flux-dev CACHES=${CACHES_CHECK:-0.484504,0.517918} BUDGET_S=${BUDGET_CHECK_S:-200} node bench/hf/pipelines.mjs > "$OUT/hf-cache-check-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/hf-cache-check-cuda.jsonl" | cut -c1-2500
fi
if bench offload && [ "$cuda" = true ]; then
  # model CPU offload and group offloading on Flux-dev beside diffusers' (issue 44): time and peak memory (OFFLOADS;
  # an entry ending +fp8, group:4+fp8, runs DTorch's transformer with FP8 linears, the 12 GiB target)
  for o in ${OFFLOADS:-model group:4}; do
    q=; [[ $o == *+fp8 ]] && q=fp8
    name=${o/:/-}; name=${name/+/-}
    DEVICE=cuda PIPELINES=flux-dev OFFLOAD=${o%+fp8} QUANTIZE=$q RUNS=1 BUDGET_S=${BUDGET_OFFLOAD_S:-180} node bench/hf/pipelines.mjs > "$OUT/hf-offload-$name-cuda.jsonl" 2>&1
    grep -h -e '"summary":true' -e '"error"' "$OUT/hf-offload-$name-cuda.jsonl" | cut -c1-1500
  done
fi
if bench cachefp8 && [ "$cuda" = true ]; then
  # the same with FP8 linears (issue 46's FP8 target), DTorch alone: cached against its own uncached FP8 run
  DEVICE=cuda PIPELINES=flux-dev QUANTIZE=fp8 DIFFUSERS=0 CACHES=${CACHES_FP8:-0.12,steps=10} BUDGET_S=${BUDGET_FP8_S:-150} node bench/hf/pipelines.mjs > "$OUT/hf-cache-fp8-cuda.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/hf-cache-fp8-cuda.jsonl" | cut -c1-2500
fi
if bench serve && [ "$cuda" = true ]; then
  # dtorch serve's batching (issue 47): 8 concurrent FLUX.1-dev 1024², 28-step requests (random weights), --max-batch 4 against one at a time, images/min
  DEVICE=cuda MODEL=${SERVE_MODEL:-flux-dev} node bench/serve/gpu_throughput.mjs > "$OUT/serve-gpu.jsonl" 2>&1
  grep -h -e '"summary":true' -e '"error"' "$OUT/serve-gpu.jsonl" | cut -c1-1200
fi
printf '{"torch":"%s","cuda":%s,"build":%s,"tests":{%s}}\n' "$version" "$cuda" "$build" "$(IFS=,; echo "${results[*]}")" | tee "$OUT/summary.json"
# the device tool brings back a limited number of files: the logs travel as one archive
(cd "$OUT" && tar -czf logs.tar.gz build.log test-*.log vitest-*.json 2>/dev/null && rm -f build.log test-*.log vitest-*.json)
