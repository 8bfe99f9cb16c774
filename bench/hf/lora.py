"""bench/hf/lora.py: diffusers' side of bench/hf/lora.mjs (run by it; JSON lines on stdout).

FLUX.1-dev's transformer at full size with diffusers' random init (diffusion_models.py's build), in
bfloat16, one denoising step at 1024x1024. For each rank: writes a LoRA on every nn.Linear in
diffusers' layout ("transformer.<module>.lora_A.weight" [r, in], ".lora_B.weight" [out, r], bfloat16,
no metadata: alpha = rank) to --dir, which DTorch's side then loads too; then times the step without
the adapter, loads the file with diffusers' own FluxTransformer2DModel.load_lora_adapter (PEFT), times
the step with it unfused, fuse_lora (timed), the fused step, unfuse_lora, unload_lora, and the memory
allocated before the load and after the unload. Eager (no torch.compile: PEFT's layers under
compile recompile per adapter change).
"""
import argparse
import json
import os
import pathlib
import sys
import time

src = os.environ.get("DIFFUSERS_SRC")
if src and src not in sys.path:
    sys.path.insert(0, src)
sys.path.insert(0, str(pathlib.Path(__file__).parent))

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from diffusion_models import build, measure, spec_for  # noqa: E402

MIB = 1024**2
GIB = 1024**3


def lora_file(model, rank, path, dtype, device):
    """A LoRA of `rank` on every nn.Linear of `model`, in diffusers' keys, written to `path`."""
    g = torch.Generator(device="cpu").manual_seed(rank)
    tensors = {}
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            a = torch.randn(rank, m.in_features, generator=g) / m.in_features**0.5
            b = torch.randn(m.out_features, rank, generator=g) * (0.01 / rank**0.5)
            tensors[f"transformer.{name}.lora_A.weight"] = a.to(dtype)
            tensors[f"transformer.{name}.lora_B.weight"] = b.to(dtype)
    save_file(tensors, str(path))
    return len(tensors) // 2


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--model", default="flux-dev")
    a.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a.add_argument("--size", default="full", choices=["full", "tiny"])
    a.add_argument("--ranks", default="16,64")
    a.add_argument("--iters", type=int, default=10)
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--dir", required=True)
    args = a.parse_args()
    device = args.device
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    cuda = device == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    specs = json.loads((pathlib.Path(__file__).parent / "models.json").read_text())
    spec, config, inputs = spec_for(specs, args.model, args.size)
    model, step, _ = build(spec, config, inputs, device, dtype)
    torch.set_grad_enabled(False)
    common = dict(bench="hf_lora", side="diffusers_eager", model=args.model, device=device, dtype=str(dtype).replace("torch.", ""), size=args.size)
    base = measure(step, model, args.iters, args.warmup, device, sync)
    print(json.dumps({**common, "phase": "base", **base}), flush=True)
    for rank in [int(r) for r in args.ranks.split(",")]:
        path = pathlib.Path(args.dir) / f"{args.model}-{args.size}-r{rank}.safetensors"
        modules = lora_file(model, rank, path, dtype, device)
        size_mib = path.stat().st_size / MIB
        sync()
        held = torch.cuda.memory_allocated() if cuda else None
        start = time.perf_counter()
        model.load_lora_adapter(str(path), prefix="transformer", adapter_name=f"r{rank}")
        sync()
        load_s = time.perf_counter() - start
        unfused = measure(step, model, args.iters, args.warmup, device, sync)
        start = time.perf_counter()
        model.fuse_lora(lora_scale=1.0)
        sync()
        fuse_s = time.perf_counter() - start
        fused = measure(step, model, args.iters, args.warmup, device, sync)
        start = time.perf_counter()
        model.unfuse_lora()
        sync()
        unfuse_s = time.perf_counter() - start
        model.unload_lora()
        sync()
        torch.cuda.empty_cache() if cuda else None
        after = torch.cuda.memory_allocated() if cuda else None
        print(json.dumps({
            **common, "phase": "lora", "rank": rank, "modules": modules, "file_mib": round(size_mib, 1), "file": str(path),
            "base_ms": base["latency_ms"], "unfused_ms": unfused["latency_ms"], "unfused_median_ms": unfused["median_ms"],
            "fused_ms": fused["latency_ms"], "overhead_unfused": round(unfused["latency_ms"] / base["latency_ms"] - 1, 4),
            "load_s": round(load_s, 3), "fuse_s": round(fuse_s, 3), "unfuse_s": round(unfuse_s, 3),
            "held_gib_before_load": None if held is None else round(held / GIB, 3),
            "held_gib_after_unload": None if after is None else round(after / GIB, 3),
            "peak_gib_unfused": unfused["peak_gib"],
        }), flush=True)


if __name__ == "__main__":
    main()
