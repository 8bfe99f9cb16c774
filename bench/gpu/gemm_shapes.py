"""cuBLAS through PyTorch on the Flux block's matmul shapes, at all tokens (4,608: one GPU) and at half
(2,304: each of two GPUs under Ulysses or sequence parallelism), and the per-token ops beside them.
A probe of the anchor's kernels, not a side-by-side benchmark: it shows which shapes fill the GPU
(e.g. one [2304, 3072] x [3072, 9216] q/k/v product against three [.., 3072] ones) and what
LibTorch's rms_norm costs on the per-head rows. Usage: python gemm_shapes.py -> JSON lines."""
import json

import torch
import torch.nn.functional as F


def best_ms(f, rounds=5, iters=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    f()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        start.record()
        for _ in range(iters):
            f()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / iters)
    return best


def main():
    bf = dict(device="cuda", dtype=torch.bfloat16)
    for m in (2304, 4608):
        for k, n in ((3072, 3072), (3072, 9216), (3072, 12288), (3072, 21504), (12288, 3072), (15360, 3072), (3072, 6144), (6144, 3072)):
            x, w, b = torch.randn(m, k, **bf), torch.randn(n, k, **bf), torch.zeros(n, **bf)
            ms = best_ms(lambda: F.linear(x, w, b))
            print(json.dumps({"bench": "gpu_gemm_shape", "m": m, "k": k, "n": n, "us": round(ms * 1000, 1), "tflops": round(2 * m * k * n / ms / 1e9, 1)}))
    qkv = torch.randn(1, 2304, 9216, **bf)
    q = qkv[..., :3072].reshape(1, 2304, 24, 128).transpose(1, 2)  # q of a fused projection, head-major view
    weight, contiguous = torch.ones(128, **bf), q.contiguous()
    h, modulation, temb = torch.randn(1, 2304, 3072, **bf), torch.randn(9216, 3072, **bf), torch.randn(1, 3072, **bf)
    for name, f in [("rms_norm, head-major view of q", lambda: F.rms_norm(q, (128,), weight, 1e-6)),
                    ("rms_norm, contiguous q", lambda: F.rms_norm(contiguous, (128,), weight, 1e-6)),
                    ("contiguous copy of v", lambda: q.contiguous()),
                    ("layer_norm [2304, 3072]", lambda: F.layer_norm(h, (3072,), eps=1e-6)),
                    ("modulation matrix-vector product", lambda: F.linear(temb, modulation))]:
        print(json.dumps({"bench": "gpu_per_token_op", "op": name, "us": round(best_ms(f) * 1000, 1)}))


if __name__ == "__main__":
    main()
