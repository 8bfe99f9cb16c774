"""PyTorch eager side of bench/overhead: `x = x + 1` on a [1] float32 CPU tensor.

Usage: python pytorch_eager.py ITERS REPEATS [cpu|cuda]  -> one JSON line (best of REPEATS).
"""
import json
import sys
import time

import torch


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    torch.set_num_threads(1)
    best = float("inf")
    with torch.inference_mode():
        for _ in range(repeats):
            x = torch.zeros(1, device=device)
            x.item()
            start = time.perf_counter_ns()
            for _ in range(iters):
                x = torch.add(x, 1)
            value = x.item()
            ns = (time.perf_counter_ns() - start) / iters
            assert value == iters, value
            best = min(best, ns)
    print(json.dumps({"bench": "overhead", "side": "pytorch_eager", "device": device, "op": "add_scalar", "shape": [1], "iters": iters,
                      "torch": torch.__version__, "ns_per_op": round(best, 1)}))


if __name__ == "__main__":
    main()
