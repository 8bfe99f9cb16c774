"""A x of an unfused LoRA (issue 42), the rank-wide product of every adapted linear's input: cuBLAS
through PyTorch against a skinny tensor-core kernel of our own, shape by shape, to decide whether
DTorch's lora_join should run its own. cuBLAS runs these [tokens, in] x [in, r] products in split-K
kernels and a reduce (the H100 trace of 6a078c9: about 21 us for 4,096 x 3,072 at rank 16, where
reading the input takes about 8 us). The kernel below reads the input once, each warp 16 rows
and a share of the inner dim (WMMA bf16 16x16x16, float accumulators, the shares summed in shared
memory), and writes the r columns where they go (a row stride: the join's last columns).
On an H100 (bench/results/lora-gemms/h100-lora-down.jsonl) this kernel lost to cuBLAS on every
shape (its B fragments come from global memory each step, and too few loads are in flight), and
cuBLAS alone came within 1.1 ms of the read floor over the step: a faster A x is worth at most that.

Ways, per shape (tokens, in, rank), in microseconds (best of 5 rounds of 20, CUDA events):
  cublas          torch.mm(x, a.t()) into a contiguous [tokens, r]
  cublas_join     the same into the join's last columns, x its first ones (what lora_join runs)
  kernel_RBxKS    our kernel into the join's last columns: RB row groups of 16 x KS inner-dim shares per block
  floor           the input's bytes at the bandwidth a copy of it reaches (half of a clone's time)
Each kernel line also gives its largest error against float32 (relative to the largest |value|).

A probe (PyTorch and one inline CUDA extension, compiled here), not a side-by-side benchmark.
Usage: python lora_down.py -> JSON lines."""
import json

import torch
from torch.utils.cpp_extension import load_inline

from gemm_shapes import best_ms

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

// out[m, n] = sum_k x[m, k] a[n, k]: x rows ldx apart, out rows ldo apart, a [16 NT, K] contiguous.
// A block: RB row groups of 16 rows x KS shares of K, one warp each; K a multiple of 16 KS.
template <int NT, int RB, int KS>
__global__ void loraDown(const __nv_bfloat16* __restrict__ x, int64_t ldx, const __nv_bfloat16* __restrict__ a, int64_t K,
                         __nv_bfloat16* __restrict__ out, int64_t ldo, int64_t M) {
  extern __shared__ float partial[];  // [RB * KS][NT][16 * 16]
  const int warp = threadIdx.x / 32;
  const int group = warp / KS, share = warp % KS;
  const int64_t row0 = (int64_t(blockIdx.x) * RB + group) * 16;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) wmma::fill_fragment(acc[j], 0.f);
  if (row0 < M) {
    const int64_t per = K / KS, k0 = share * per, k1 = k0 + per;
    for (int64_t k = k0; k < k1; k += 32) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      const bool second = k + 16 < k1;
      wmma::load_matrix_sync(fa[0], x + row0 * ldx + k, ldx);
      if (second) wmma::load_matrix_sync(fa[1], x + row0 * ldx + k + 16, ldx);
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (u == 1 && !second) break;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
          wmma::load_matrix_sync(fb, a + int64_t(j) * 16 * K + k + 16 * u, K);
          wmma::mma_sync(acc[j], fa[u], fb, acc[j]);
        }
      }
    }
  }
  float* mine = partial + warp * NT * 256;
#pragma unroll
  for (int j = 0; j < NT; ++j) wmma::store_matrix_sync(mine + j * 256, acc[j], 16, wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < RB * 16 * NT * 16; e += blockDim.x) {
    const int r = e / (NT * 16), c = e % (NT * 16);
    const int g = r / 16, rr = r % 16, j = c / 16, cc = c % 16;
    float s = 0.f;
    for (int q = 0; q < KS; ++q) s += partial[((g * KS + q) * NT + j) * 256 + rr * 16 + cc];
    const int64_t row = (int64_t(blockIdx.x) * RB + g) * 16 + rr;
    if (row < M) out[row * ldo + c] = __float2bfloat16(s);
  }
}

template <int NT, int RB, int KS>
void launch(const at::Tensor& x, const at::Tensor& a, at::Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1);
  const int64_t blocks = (M / 16 + RB - 1) / RB;
  const size_t shared = size_t(RB) * KS * NT * 256 * sizeof(float);
  auto kernel = loraDown<NT, RB, KS>;
  if (shared > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  kernel<<<blocks, RB * KS * 32, shared, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()), x.stride(0), reinterpret_cast<const __nv_bfloat16*>(a.data_ptr()), K,
      reinterpret_cast<__nv_bfloat16*>(out.data_ptr()), out.stride(0), M);
}

template <int RB, int KS>
void byRank(const at::Tensor& x, const at::Tensor& a, at::Tensor& out) {
  switch (a.size(0) / 16) {
    case 1: return launch<1, RB, KS>(x, a, out);
    case 2: return launch<2, RB, KS>(x, a, out);
    case 3: return launch<3, RB, KS>(x, a, out);
    case 4: return launch<4, RB, KS>(x, a, out);
    default: TORCH_CHECK(false, "rank must be 16, 32, 48 or 64");
  }
}

void lora_down(at::Tensor x, at::Tensor a, at::Tensor out, int64_t rb, int64_t ks) {
  TORCH_CHECK(x.size(0) % 16 == 0 && x.size(1) % (16 * ks) == 0 && x.stride(1) == 1 && x.stride(0) % 16 == 0 && a.is_contiguous());
  if (rb == 2 && ks == 4) return byRank<2, 4>(x, a, out);
  if (rb == 1 && ks == 8) return byRank<1, 8>(x, a, out);
  if (rb == 4 && ks == 2) return byRank<4, 2>(x, a, out);
  if (rb == 1 && ks == 4) return byRank<1, 4>(x, a, out);
  TORCH_CHECK(false, "no such block shape");
}
"""
CPP = "void lora_down(at::Tensor x, at::Tensor a, at::Tensor out, int64_t rb, int64_t ks);"

CONFIGS = [(2, 4), (1, 8), (4, 2), (1, 4)]

# Flux-dev's adapted linear inputs at 1024x1024 with an adapter on every linear: tokens, in, the
# rank of the product (q/k/v stacked: 3 r; a single block's shared join: 4 r), calls per step
SHAPES = [
    ("double.img.norm1.qkv", 4096, 3072, 48, 19),
    ("double.img.norm2.ff_in", 4096, 3072, 16, 19),
    ("double.img.to_out", 4096, 3072, 16, 19),
    ("double.img.ff_out", 4096, 12288, 16, 19),
    ("double.txt.norm1.qkv", 512, 3072, 48, 19),
    ("single.shared_join", 4608, 3072, 64, 38),
    ("single.proj_out", 4608, 15360, 16, 38),
]


def us(f):
    return round(best_ms(f) * 1000, 1)


def main():
    ext = load_inline("lora_down_probe", CPP, cuda_sources=CUDA, functions=["lora_down"], extra_cuda_cflags=["-O3", "-arch=sm_90"], verbose=False)
    dev = torch.cuda.get_device_name()
    totals = {}
    for name, tokens, inner, rank, calls in SHAPES:
        torch.manual_seed(0)
        joined = torch.randn(tokens, inner + rank, device="cuda", dtype=torch.bfloat16)
        x, tail = joined[:, :inner], joined[:, inner:]
        xc = x.contiguous()
        a = (torch.randn(rank, inner, device="cuda") / inner**0.5).to(torch.bfloat16)
        want = xc.float() @ a.float().t()
        scale = want.abs().max().item()
        row = {"bench": "gpu_lora_down", "device": dev, "linear": name, "tokens": tokens, "in": inner, "rank": rank, "calls": calls, "us": {}, "error": {}}
        row["us"]["cublas"] = us(lambda: torch.mm(xc, a.t()))
        row["us"]["cublas_join"] = us(lambda: torch.mm(x, a.t(), out=tail))
        row["us"]["floor"] = round(us(lambda: xc.clone()) / 2, 1)
        for rb, ks in CONFIGS:
            key = f"kernel_{rb}x{ks}"
            try:
                tail.zero_()
                ext.lora_down(x, a, tail, rb, ks)
                torch.cuda.synchronize()
                row["error"][key] = round(((tail.float() - want).abs().max().item()) / scale, 5)
                row["us"][key] = us(lambda: ext.lora_down(x, a, tail, rb, ks))
            except RuntimeError as e:  # a shape this block shape does not take
                row["error"][key] = str(e).splitlines()[0][:120]
        print(json.dumps(row), flush=True)
        for k, v in row["us"].items():
            totals[k] = totals.get(k, 0) + v * calls
    print(json.dumps({"bench": "gpu_lora_down", "summary": True, "device": dev, "step_ms": {k: round(v / 1000, 3) for k, v in totals.items()}}), flush=True)


if __name__ == "__main__":
    main()
