"""PyTorch eager side of bench/gpu/flux_block.mjs: the same block, weights and sizes.

Usage: python flux_block.py DEVICE TOKENS ITERS ROUNDS HEADS HEAD_DIM -> one JSON line (best ms per
forward over ROUNDS rounds of ITERS, peak memory).
"""
import json
import sys
import time

import torch
import torch.nn.functional as F


def main():
    device, tokens, iters, rounds, heads, head_dim = sys.argv[1], *map(int, sys.argv[2:7])
    hidden = heads * head_dim
    mlp_hidden = 4 * hidden
    bf = dict(dtype=torch.bfloat16 if device == "cuda" else torch.float32, device=device)
    g = torch.Generator().manual_seed(0)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(**bf)  # noqa: E731
    w = dict(norm=r(3 * hidden, hidden), normB=torch.zeros(3 * hidden, **bf), q=r(hidden, hidden), k=r(hidden, hidden),
             v=r(hidden, hidden), qkB=torch.zeros(hidden, **bf), nq=torch.ones(head_dim, **bf), nk=torch.ones(head_dim, **bf),
             mlp=r(mlp_hidden, hidden), mlpB=torch.zeros(mlp_hidden, **bf), out=r(hidden, hidden + mlp_hidden),
             outB=torch.zeros(hidden, **bf))
    x = torch.randn(1, tokens, hidden, generator=g).to(**bf)
    temb = torch.randn(1, hidden, generator=g).to(**bf)

    def block(x, temb):
        shift, scale, gate = F.linear(F.silu(temb), w["norm"], w["normB"]).chunk(3, -1)
        nx = F.layer_norm(x, (hidden,), eps=1e-6) * (1 + scale[:, None]) + shift[:, None]
        mlp = F.gelu(F.linear(nx, w["mlp"], w["mlpB"]), approximate="tanh")
        heads_of = lambda t: t.reshape(1, tokens, heads, head_dim).transpose(1, 2)  # noqa: E731
        q = F.rms_norm(heads_of(F.linear(nx, w["q"], w["qkB"])), (head_dim,), w["nq"], eps=1e-6)
        k = F.rms_norm(heads_of(F.linear(nx, w["k"], w["qkB"])), (head_dim,), w["nk"], eps=1e-6)
        v = heads_of(F.linear(nx, w["v"], w["qkB"]))
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, tokens, hidden)
        h = F.linear(torch.cat([attn, mlp], 2), w["out"], w["outB"])
        return x + gate[:, None] * h

    with torch.inference_mode():
        for _ in range(3):
            block(x, temb)
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        sync()
        rest = torch.cuda.memory_allocated() if device == "cuda" else None  # weights, inputs
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        ms = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(iters):
                block(x, temb)
            sync()
            ms = min(ms, (time.perf_counter() - start) * 1000 / iters)
        checksum = block(x, temb).float().abs().mean().item()
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    print(json.dumps({"bench": "gpu_flux_block", "side": "pytorch_eager", "device": device, "tokens": tokens, "iters": iters, "rounds": rounds,
                      "ms_per_forward": round(ms, 3), "peak_bytes": peak, "rest_bytes": rest, "checksum": checksum, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
