"""diffusers side of bench/hf/diffusion_models.mjs: FLUX.1-dev's and SD3-medium's transformers and
SD3's / Flux's VAE decoder, at the sizes of bench/hf/models.json (SIZE tiny: its tiny configs),
run by diffusers' own model classes (random weights from their own init, made on the device),
eager and under torch.compile, with the shapes DTorch's side draws.

diffusers is no wheel on the GPU machine: its source is put on sys.path from DIFFUSERS_SRC (the
folder holding the `diffusers` package, e.g. /work/diffusers-src/src) or PYTHONPATH.

Usage: python diffusion_models.py --models flux-dev,sd3-medium,vae-decode [--device cuda]
         [--size full|tiny] [--iters 10] [--warmup 3] [--compile 0|1|default] [--compile-mode default]
         [--trace 1] [--pass before]
  --compile default: each model's "compile.default" in models.json (SD3 and the VAE yes, Flux no);
  compiled after the eager timing: Flux's repeated blocks (diffusers' compile_repeated_blocks),
  SD3's whole transformer, the VAE's decoder.
Prints one JSON line per model and mode: latency_ms (best single step, each waited for),
median_ms, pipelined_ms (steps queued back to back), peak_gib (torch.cuda.max_memory_allocated
over the timed steps, weights included), held_gib (allocated before them: weights and inputs),
peak_above_held_gib, the output's shape and whether it is finite; then (--trace 1, cuda) a line
per mode with "trace": true: from torch.profiler the GPU's busy time in one step (the union of its
kernels' intervals) and the share of the latency it sat idle (diffusion_models.mjs merges them).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time

src = os.environ.get("DIFFUSERS_SRC")
if src and src not in sys.path:
    sys.path.insert(0, src)

import torch  # noqa: E402
from gpu_busy import busy_ms, kernel_breakdown  # noqa: E402

GIB = 1024**3




def spec_for(specs, name, size):
    spec = specs[name]
    config, inputs = dict(spec["config"]), dict(spec["inputs"])
    if size == "tiny":
        config.update(spec["tiny"]["config"])
        inputs.update(spec["tiny"]["inputs"])
    return spec, config, inputs


def build(spec, config, inputs, device, dtype):
    """The model with diffusers' own random init (made on the device, in `dtype`), its inputs, a
    step function and the output's expected shape."""
    import diffusers
    cls = getattr(diffusers, spec["class"])
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters made in bfloat16 directly: no float32 copy of Flux's 12B
    try:
        with torch.device(device):
            model = cls(**config)
    finally:
        torch.set_default_dtype(default)
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    g = torch.Generator(device="cpu").manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g).to(device=device, dtype=dtype)  # noqa: E731
    b, h, w = inputs["batch"], inputs["height"], inputs["width"]
    if spec["class"] == "FluxTransformer2DModel":
        t = inputs["text_tokens"]
        img_ids = torch.zeros(h, w, 3)
        img_ids[..., 1] = torch.arange(h)[:, None]
        img_ids[..., 2] = torch.arange(w)[None, :]
        kwargs = dict(hidden_states=r(b, h * w, config["in_channels"]), encoder_hidden_states=r(b, t, config["joint_attention_dim"]),
                      pooled_projections=r(b, config["pooled_projection_dim"]), timestep=torch.full((b,), inputs["timestep"], device=device),
                      img_ids=img_ids.reshape(h * w, 3).to(device=device, dtype=dtype), txt_ids=torch.zeros(t, 3, device=device, dtype=dtype),
                      return_dict=False)
        if config.get("guidance_embeds"):
            kwargs["guidance"] = torch.full((b,), inputs["guidance"], device=device)
        return model, lambda m: m(**kwargs)[0], [b, h * w, config["in_channels"]]
    if spec["class"] == "SD3Transformer2DModel":
        t = inputs["text_tokens"]
        kwargs = dict(hidden_states=r(b, config["in_channels"], h, w), encoder_hidden_states=r(b, t, config["joint_attention_dim"]),
                      pooled_projections=r(b, config["pooled_projection_dim"]), timestep=torch.full((b,), inputs["timestep"], device=device),
                      return_dict=False)
        return model, lambda m: m(**kwargs)[0], [b, config["out_channels"], h, w]
    if spec["class"] == "AutoencoderKL":
        z = r(b, config["latent_channels"], h, w)
        scale = 2 ** (len(config["block_out_channels"]) - 1)
        return model, lambda m: m.decode(z, return_dict=False)[0], [b, config["out_channels"], h * scale, w * scale]
    raise ValueError(f"no inputs for {spec['class']}")


def compiled(spec, model, scope, mode):
    """torch.compile'd: Flux's repeated blocks in place (regional), SD3 whole, the VAE's decoder."""
    kwargs = {} if mode == "default" else {"mode": mode}
    if scope == "regional":
        model.compile_repeated_blocks(**kwargs)
        return model
    if spec["class"] == "AutoencoderKL":
        model.decoder = torch.compile(model.decoder, **kwargs)
        return model
    return torch.compile(model, **kwargs)


def measure(step, m, iters, warmup, device, sync):
    cuda = device == "cuda"
    start = time.perf_counter()
    for _ in range(warmup):  # kernels, allocator; compilation for compiled models
        step(m)
    sync()
    warmup_s = time.perf_counter() - start
    held = torch.cuda.memory_allocated() if cuda else None
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        step(m)
        sync()
        times.append((time.perf_counter() - start) * 1000)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    start = time.perf_counter()
    for _ in range(iters):
        step(m)
    sync()
    pipelined = (time.perf_counter() - start) * 1000 / iters
    return dict(latency_ms=round(min(times), 3), median_ms=round(statistics.median(times), 3), pipelined_ms=round(pipelined, 3),
                peak_gib=None if peak is None else round(peak / GIB, 3), held_gib=None if held is None else round(held / GIB, 3),
                peak_above_held_gib=None if peak is None else round((peak - held) / GIB, 3),
                warmup_s=round(warmup_s, 1))


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--models", default="flux-dev,sd3-medium,vae-decode")
    a.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    a.add_argument("--size", default="full", choices=["full", "tiny"])
    a.add_argument("--iters", type=int, default=10)
    a.add_argument("--warmup", type=int, default=3)
    a.add_argument("--compile", default="default", help="0, 1 or default (each model's compile.default)")
    a.add_argument("--compile-mode", default="default", help="torch.compile mode: default, reduce-overhead, max-autotune, ...")
    a.add_argument("--trace", type=int, default=1, help="1: the GPU's busy time from torch.profiler (cuda only)")
    a.add_argument("--pass", dest="pass_", default="before", help="a label: before / after DTorch's run")
    args = a.parse_args()
    device = args.device
    dtype = getattr(torch, args.dtype or ("bfloat16" if device == "cuda" else "float32"))
    specs = json.loads((pathlib.Path(__file__).parent / "models.json").read_text())
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for name in args.models.split(","):
        base = {"bench": "hf_diffusion", "model": name, "device": device, "dtype": str(dtype).removeprefix("torch."), "size": args.size, "pass": args.pass_}
        try:
            for line in run_one(specs, name, args, device, dtype, sync):
                print(json.dumps({**base, **line}), flush=True)
        except Exception as e:  # noqa: BLE001 (one model's failure is a line; the others still run)
            print(json.dumps({**base, "side": "diffusers", "error": f"{type(e).__name__}: {str(e)[:400]}"}), flush=True)
        # the model and its inputs are gone with run_one's frame: its memory is free before the next builds
        if device == "cuda":
            torch.cuda.empty_cache()
        torch._dynamo.reset()


def run_one(specs, name, args, device, dtype, sync):
    """One model's lines, each as soon as it is known (a compile that runs past the caller's budget
    leaves the eager line behind): eager, compiled where asked for, then their kernel traces."""
    import diffusers
    spec, config, inputs = spec_for(specs, name, args.size)
    start = time.perf_counter()
    model, step, want_shape = build(spec, config, inputs, device, dtype)
    sync()
    build_s = time.perf_counter() - start
    compile_too = spec["compile"]["default"] if args.compile == "default" else args.compile == "1"
    timed = []
    with torch.inference_mode():
        modes = [("eager", lambda: model)] + ([("compiled", lambda: compiled(spec, model, spec["compile"]["scope"], args.compile_mode))] if compile_too else [])
        for mode, make in modes:
            m = make()
            r = measure(step, m, args.iters, args.warmup, device, sync)
            out = step(m)
            yield {"side": f"diffusers_{mode}", **r, "gpu_busy_ms": None, "gpu_events": None, "gpu_idle_share": None,
                   "shape": list(out.shape), "shape_ok": list(out.shape) == want_shape, "finite": bool(torch.isfinite(out).all().item()),
                   "checksum": out.float().abs().mean().item(), "build_s": round(build_s, 1),
                   "compile_mode": args.compile_mode if mode == "compiled" else None,
                   "compile_scope": spec["compile"]["scope"] if mode == "compiled" else None,
                   "torch": torch.__version__, "diffusers": diffusers.__version__}
            del out
            timed.append((mode, m, r["latency_ms"]))
        # traced after every timing: a profiler leaves the process slower to launch kernels. A
        # compile in place (Flux's repeated blocks, the VAE's decoder) left no eager model here to
        # trace: the eager pass run again after DTorch's (a process of its own) gives that trace
        in_place = compile_too and (spec["compile"]["scope"] == "regional" or spec["class"] == "AutoencoderKL")
        if device == "cuda" and args.trace:
            for mode, m, latency in timed:
                if mode == "eager" and in_place:
                    continue
                busy, events = busy_ms(lambda: step(m), sync)
                kernels = kernel_breakdown(lambda: step(m), sync)
                yield {"side": f"diffusers_{mode}", "trace": True, "gpu_busy_ms": round(busy, 3), "gpu_events": events,
                       "gpu_idle_share": round(1 - busy / latency, 3), "kernel_ms": kernels["categories"], "top_kernels": kernels["top"]}


if __name__ == "__main__":
    main()
