"""PyTorch eager side of bench/hf/overhead_probe.mjs: the same ops and shapes, per op (us).

Usage: python overhead_probe.py DEVICE N -> one JSON line {op: microseconds per op}.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F


def main():
    device, n = sys.argv[1], int(sys.argv[2])
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    o = dict(device=device, dtype=dtype)
    x, w, b, lnw = torch.randn(1, 77, 768, **o), torch.randn(768, 768, **o) * 0.02, torch.zeros(768, **o), torch.ones(768, **o)
    q = torch.randn(1, 12, 77, 64, **o)
    ops = {  # each maps a tensor to one of the same shape, applied in a chain
        "linear": (x, lambda t: F.linear(t, w, b)),
        "layer_norm": (x, lambda t: F.layer_norm(t, (768,), lnw, b)),
        "sdpa_causal": (q, lambda t: F.scaled_dot_product_attention(t, q, q, is_causal=True)),
        "add": (x, lambda t: t + x),
        "four_views": (x, lambda t: t.reshape(1, 77, 12, 64).transpose(1, 2).transpose(1, 2).reshape(1, 77, 768)),
    }
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = {}
    with torch.inference_mode():
        for name, (first, fn) in ops.items():
            best = float("inf")
            for _ in range(3):
                sync()
                start = time.perf_counter()
                t = first
                for _ in range(n):
                    t = fn(t)
                t.float().sum().item()
                best = min(best, (time.perf_counter() - start) * 1e6 / n)
            out[name] = round(best, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
