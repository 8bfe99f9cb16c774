"""cuBLAS through PyTorch on the matmuls a rank-r LoRA adds to Flux-dev's linears (issue 42), shape by
shape, to choose how DTorch runs an unfused adapter: each linear of the 1024x1024 step (its tokens,
in, out, and whether a GELU follows) timed as the base product and as each way of adding B (A x):

  base            x Wᵀ + b (the GELU in the epilogue where one follows), as without adapters
  delta_first     h = A x; d = h Bᵀ + b; d += x Wᵀ (the base matmul accumulates: beta = 1)
  base_first      h = A x; y = x Wᵀ + b; y += h Bᵀ (the small product accumulates into y)
  wide_pad{P}     h = A x; [x | h | 0] times [W | B | 0] with K = in + r padded to a multiple of P
                  (P = 1: no padding); the GELU in the epilogue
  wide_gemm{P}    the wide product's matmul alone (no A x, no join), to split the join's cost off
  ax              A x alone
  tall{P}         [W; A; 0] times x with N = out + r padded to a multiple of P gives [y | h] in one
                  matmul (x read once; bias [b; 0]); then y += h Bᵀ on y's strided rows (no GELU
                  can follow: linears without one)
  tall_gemm{P}    the tall product's matmul alone

A probe of the anchor's kernels, not a side-by-side benchmark. Per linear a JSON line with each
way's microseconds; at the end the step's total per way (each linear times its calls per step).
Usage: python lora_gemms.py [--rank 16] -> JSON lines."""
import argparse
import json

import torch
import torch.nn.functional as F

from gemm_shapes import best_ms  # this folder's timing (CUDA events, best of 5 rounds)


def best_us(f):
    return round(best_ms(f) * 1000, 1)


# Flux-dev's linears at 1024x1024 (4,096 image and 512 text tokens): name, tokens, in, out,
# GELU after, calls per step (19 double blocks, 38 single blocks)
LINEARS = [
    ("double.img.qkv", 4096, 3072, 9216, False, 19),
    ("double.img.to_out", 4096, 3072, 3072, False, 19),
    ("double.img.ff_in", 4096, 3072, 12288, True, 19),
    ("double.img.ff_out", 4096, 12288, 3072, False, 19),
    ("double.txt.qkv", 512, 3072, 9216, False, 19),
    ("double.txt.to_out", 512, 3072, 3072, False, 19),
    ("double.txt.ff_in", 512, 3072, 12288, True, 19),
    ("double.txt.ff_out", 512, 12288, 3072, False, 19),
    ("single.qkv", 4608, 3072, 9216, False, 38),
    ("single.proj_mlp", 4608, 3072, 12288, True, 38),
    ("single.proj_out", 4608, 15360, 3072, False, 38),
]
PADS = (1, 64, 128, 256)


def padded(k, p):
    return -(-k // p) * p


def ways(tokens, k, n, gelu, rank):
    bf = dict(device="cuda", dtype=torch.bfloat16)
    x, w, b = torch.randn(tokens, k, **bf) / k**0.5, torch.randn(n, k, **bf), torch.randn(n, **bf)
    a, bb = torch.randn(rank, k, **bf) / k**0.5, torch.randn(n, rank, **bf)

    def epilogue(c, m1, m2):  # c + m1 m2, then the GELU where one follows (cuBLASLt's epilogue)
        return torch._addmm_activation(c, m1, m2, use_gelu=True) if gelu else torch.addmm(c, m1, m2)

    def delta_first():
        d = torch.addmm(b, F.linear(x, a), bb.t())
        d.addmm_(x, w.t())
        return F.gelu(d, approximate="tanh") if gelu else d

    def base_first():
        y = torch.addmm(b, x, w.t())
        y.addmm_(F.linear(x, a), bb.t())
        return F.gelu(y, approximate="tanh") if gelu else y

    out = {"base": best_us(lambda: epilogue(b, x, w.t())), "ax": best_us(lambda: F.linear(x, a)),
           "delta_first": best_us(delta_first), "base_first": best_us(base_first)}
    for p in PADS:
        r = padded(k + rank, p) - k
        ap = torch.cat([a, torch.zeros(r - rank, k, **bf)])
        wp = torch.cat([w, bb, torch.zeros(n, r - rank, **bf)], 1)
        xh = torch.cat([x, F.linear(x, ap)], 1)
        out[f"wide_pad{p}"] = best_us(lambda: epilogue(b, torch.cat([x, F.linear(x, ap)], 1), wp.t()))
        out[f"wide_gemm{p}"] = best_us(lambda: epilogue(b, xh, wp.t()))
    if not gelu:
        for p in PADS:
            r = padded(n + rank, p) - n
            wt = torch.cat([w, a, torch.zeros(r - rank, k, **bf)])
            bt = torch.cat([b, torch.zeros(r, **bf)])

            def tall():
                yh = torch.addmm(bt, x, wt.t())
                y = yh[:, :n]
                y.addmm_(yh[:, n:n + rank], bb.t())
                return y

            out[f"tall{p}"] = best_us(tall)
            out[f"tall_gemm{p}"] = best_us(lambda: torch.addmm(bt, x, wt.t()))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, default=16)
    args = parser.parse_args()
    totals = {}
    device = torch.cuda.get_device_name()
    for name, tokens, k, n, gelu, calls in LINEARS:
        us = ways(tokens, k, n, gelu, args.rank)
        print(json.dumps({"bench": "gpu_lora_gemm", "device": device, "rank": args.rank, "linear": name, "tokens": tokens, "in": k, "out": n, "gelu": gelu, "calls": calls, "us": us}), flush=True)
        for way, t in us.items():
            totals[way] = totals.get(way, 0) + t * calls
        # a GELU linear has no tall way: it counts as base_first there (what DTorch would run)
        for p in PADS if gelu else ():
            for way in (f"tall{p}", f"tall_gemm{p}"):
                totals[way] = totals.get(way, 0) + us["base_first" if way.startswith("tall") and "gemm" not in way else "base"] * calls
        best = min((w for w in us if w.startswith(("delta_first", "base_first", "wide_pad")) or (w.startswith("tall") and "gemm" not in w)), key=us.get)
        print(json.dumps({"bench": "gpu_lora_gemm", "linear": name, "best": best, "best_added_us": round(us[best] - us["base"], 1)}))
        totals["best_per_linear"] = totals.get("best_per_linear", 0) + us[best] * calls
    ms = {way: round(t / 1000, 3) for way, t in totals.items()}
    print(json.dumps({"bench": "gpu_lora_gemm", "summary": True, "device": device, "rank": args.rank, "step_ms": ms,
                      "added_ms": {way: round(t - ms["base"], 3) for way, t in ms.items() if way not in ("base", "ax")}}))


if __name__ == "__main__":
    main()
