"""diffusers side of bench/hf/pipelines.mjs: FluxPipeline and StableDiffusion3Pipeline end to end at
full size, every component built by its own library's class (diffusers' transformer and VAE,
transformers' text encoders) with that library's random init, made on the device in bfloat16; the
tokenizers from DTorch's tiny-pipeline assets (CLIP's real vocabulary; a small T5 SentencePiece:
random weights make the ids' meaning moot, the padded lengths are the real ones).

Usage: python pipelines.py --pipelines flux-dev,sd3-medium --tokenizers DIR [--runs 2] [--device cuda] [--size full|tiny] [--caches 0.12,0.08]
  DIR holds clip/ and t5/ tokenizer folders (pipelines.mjs unpacks them).
--caches: after the uncached runs, one run (after a warm-up) per entry, first-block:THRESHOLD with
diffusers' First-Block Cache (apply_first_block_cache, what transformer.enable_cache applies) or
taylorseer:INTERVAL with its TaylorSeer (apply_taylorseer_cache, the config's other defaults),
reporting its time, the transformer calls that ran the cached work, each call's statistic (First-Block
Cache), and the PSNR of its image against the uncached one.
Prints a JSON line per pipeline: seconds end to end (best of --runs after one warm-up run, each
waited for), the time of each phase (encode_prompt, the denoising loop, the VAE decode and image
postprocessing), the peak of torch.cuda.max_memory_allocated over the timed runs and what the
components hold.
"""
import argparse
import json
import math
import os
import pathlib
import sys
import time

src = os.environ.get("DIFFUSERS_SRC")
if src and src not in sys.path:
    sys.path.insert(0, src)

import torch  # noqa: E402

GIB = 1024**3
HERE = pathlib.Path(__file__).parent


def made_on(device, dtype, make):
    """make() with parameters created on `device` in `dtype` directly (no float32 host copy of 12B)."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            return make()
    finally:
        torch.set_default_dtype(default)


def component(models, entry, device, dtype, size):
    import diffusers
    import transformers
    spec = models[entry["model"]]
    tiny = {**spec.get("tiny", {}).get("config", {}), **entry.get("tiny", {})} if size == "tiny" else {}
    config = {**spec["config"], **entry.get("config", {}), **tiny}
    cls_name = entry.get("class", spec["class"])
    if hasattr(diffusers, cls_name) and cls_name not in ("CLIPTextModel", "CLIPTextModelWithProjection", "T5EncoderModel"):
        model = made_on(device, dtype, lambda: getattr(diffusers, cls_name)(**config))
    else:
        config_cls = transformers.T5Config if cls_name == "T5EncoderModel" else transformers.CLIPTextConfig
        model = made_on(device, dtype, lambda: getattr(transformers, cls_name)(config_cls(**config)))
    return model.to(device=device, dtype=dtype).eval().requires_grad_(False)


def tokenizer(kind, folder):
    import transformers
    return transformers.CLIPTokenizer.from_pretrained(str(folder / "clip")) if kind == "clip" else transformers.T5TokenizerFast.from_pretrained(str(folder / "t5"))


def build(spec, models, device, dtype, tokenizers, size):
    import diffusers
    parts = {"scheduler": diffusers.FlowMatchEulerDiscreteScheduler(**spec["scheduler"])}
    suffix = {"text_encoder": "", "text_encoder_2": "_2", "text_encoder_3": "_3"}
    for name, entry in spec["components"].items():
        parts[name] = component(models, entry, device, dtype, size)
        if name in suffix:
            parts["tokenizer" + suffix[name]] = tokenizer(entry["tokenizer"], tokenizers)
    return getattr(diffusers, spec["pipeline"])(**parts)


def timed_phases(pipe, sync):
    """Wraps encode_prompt and the VAE decode so each run reports their time (the rest is the loop)."""
    phases = {}

    def wrap(obj, name, key):
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            sync()
            start = time.perf_counter()
            out = inner(*args, **kwargs)
            sync()
            phases[key] = phases.get(key, 0.0) + time.perf_counter() - start
            return out
        setattr(obj, name, timed)
    wrap(pipe, "encode_prompt", "encode_s")
    wrap(pipe.vae, "decode", "decode_s")
    wrap(pipe.vae, "encode", "image_encode_s")
    return phases


def cached_runs(pipe, call, entries, reference, sync):
    """diffusers' First-Block Cache or TaylorSeer for each entry (see the module's docstring)."""
    from diffusers.hooks import FirstBlockCacheConfig, HookRegistry, TaylorSeerCacheConfig, apply_first_block_cache, apply_taylorseer_cache
    from diffusers.hooks.first_block_cache import _FBC_BLOCK_HOOK, _FBC_LEADER_BLOCK_HOOK, FBCHeadBlockHook
    from diffusers.hooks.taylorseer_cache import _TAYLORSEER_CACHE_HOOK, TaylorSeerCacheHook
    decisions = []
    should_compute = FBCHeadBlockHook._should_compute_remaining_blocks
    measure = TaylorSeerCacheHook._measure_should_compute
    first_hook = []

    def taylor_recording(self):
        computed, state = measure(self)
        if not first_hook:
            first_hook.append(self)
        if self is first_hook[0]:
            decisions.append((None, bool(computed)))
        return computed, state
    TaylorSeerCacheHook._measure_should_compute = taylor_recording

    def recording(self, residual):
        state = self.state_manager.get_state()
        prev = state.head_block_residual
        stat = None if prev is None else ((residual - prev).abs().mean() / prev.abs().mean()).item()
        computed = should_compute(self, residual)
        decisions.append((stat, computed))
        return computed
    FBCHeadBlockHook._should_compute_remaining_blocks = recording
    results = []
    try:
        for entry in entries:
            kind, setting = entry.split(":")
            first_hook.clear()
            if kind == "taylorseer":
                apply_taylorseer_cache(pipe.transformer, TaylorSeerCacheConfig(cache_interval=int(setting)))
                hooks = (_TAYLORSEER_CACHE_HOOK,)
            else:
                apply_first_block_cache(pipe.transformer, FirstBlockCacheConfig(threshold=float(setting)))
                hooks = (_FBC_LEADER_BLOCK_HOOK, _FBC_BLOCK_HOOK)
            # the transformer's registry keeps the child registries it found at its first
            # cache_context (the uncached runs': none), and would set no context on the blocks' new hooks
            HookRegistry.check_if_exists_or_initialize(pipe.transformer)._child_registries_cache = None
            try:
                for _ in range(2):  # a warm-up, then the timed run
                    decisions.clear()
                    sync()
                    start = time.perf_counter()
                    images = pipe(**call, generator=torch.Generator("cpu").manual_seed(0), output_type="pt").images
                    sync()
                    seconds = time.perf_counter() - start
            finally:
                registry = HookRegistry.check_if_exists_or_initialize(pipe.transformer)
                for hook in hooks:
                    registry.remove_hook(hook, recurse=True)
            mse = (images.float() - reference.float()).square().mean().item()
            results.append({"cache": entry, "seconds": round(seconds, 3), "calls": len(decisions), "computed": sum(c for _, c in decisions),
                            "psnr_db": round(10 * math.log10(1 / mse), 2) if mse > 0 else None,
                            "statistics": [None if s is None else float(f"{s:.4g}") for s, _ in decisions]})
    finally:
        FBCHeadBlockHook._should_compute_remaining_blocks = should_compute
        TaylorSeerCacheHook._measure_should_compute = measure
    return results


def offload(pipe, kind, device):
    """The weights in host memory: each model on the device while it runs, or the blocks of the
    transformer and text encoders in groups of N (block_level, use_stream), as DTorch's side."""
    if kind == "model":
        pipe.enable_model_cpu_offload(device=device)
        return
    from diffusers.hooks import apply_group_offloading
    blocks = int(kind.split(":")[1]) if ":" in kind else 1
    for name in ["text_encoder", "text_encoder_2", "text_encoder_3", "transformer"]:
        module = getattr(pipe, name, None)
        if module is not None:
            apply_group_offloading(module, onload_device=torch.device(device), offload_device=torch.device("cpu"),
                                   offload_type="block_level", num_blocks_per_group=blocks, use_stream=device == "cuda")


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--pipelines", default="flux-dev,sd3-medium")
    a.add_argument("--tokenizers", required=True)
    a.add_argument("--runs", type=int, default=2)
    a.add_argument("--device", default="cuda")
    a.add_argument("--size", default="full", choices=["full", "tiny"])
    a.add_argument("--caches", default="")
    a.add_argument("--offload", default="", help="model, or group:N (N blocks to a group), as DTorch's side runs")
    args = a.parse_args()
    import diffusers
    specs = json.loads((HERE / "pipelines.json").read_text())
    specs = {name: {**specs[spec["base"]], **spec} if isinstance(spec, dict) and "base" in spec else spec for name, spec in specs.items()}
    models = json.loads((HERE / "models.json").read_text())
    device, dtype = args.device, torch.bfloat16 if args.device == "cuda" else torch.float32
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for name in args.pipelines.split(","):
        base = {"bench": "hf_pipeline", "pipeline": name, "side": "diffusers_eager", "device": device, "dtype": str(dtype).removeprefix("torch."), **({"offload": args.offload} if args.offload else {})}
        try:
            start = time.perf_counter()
            pipe = build(specs[name], models, device, dtype, pathlib.Path(args.tokenizers), args.size)
            if args.offload:
                offload(pipe, args.offload, device)
            sync()
            build_s = time.perf_counter() - start
            phases = timed_phases(pipe, sync)
            call = {**specs[name]["call"], **(specs[name].get("tiny_call", {}) if args.size == "tiny" else {})}
            if "image_seed" in call:  # image to image: the picture DTorch's side draws from the same seed
                seed = call.pop("image_seed")
                picture = torch.rand(1, 3, call["height"], call["width"], generator=torch.Generator().manual_seed(seed))
                call["image"] = picture.to(device)
            held = torch.cuda.memory_allocated() if device == "cuda" else None
            runs = []
            with torch.inference_mode():
                for i in range(args.runs + 1):  # the first: warm-up (kernels, allocator)
                    if i == 1 and device == "cuda":
                        torch.cuda.reset_peak_memory_stats()
                    phases.clear()
                    sync()
                    start = time.perf_counter()
                    images = pipe(**call, generator=torch.Generator("cpu").manual_seed(0), output_type="pt").images
                    sync()
                    total = time.perf_counter() - start
                    runs.append({"s": total, **phases, "denoise_s": total - phases.get("encode_s", 0) - phases.get("decode_s", 0) - phases.get("image_encode_s", 0)})
            best = min(runs[1:], key=lambda r: r["s"])
            peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
            entries = [e for e in args.caches.split(",") if e]
            with torch.inference_mode():
                caches = cached_runs(pipe, call, entries, images, sync) if entries else None
            print(json.dumps({**base, "seconds": round(best["s"], 3), "runs_s": [round(r["s"], 3) for r in runs[1:]], "warmup_s": round(runs[0]["s"], 3),
                              "encode_s": round(best.get("encode_s", 0), 3), "image_encode_s": round(best.get("image_encode_s", 0), 3), "denoise_s": round(best["denoise_s"], 3), "decode_s": round(best.get("decode_s", 0), 3),
                              "peak_gib": None if peak is None else round(peak / GIB, 3), "held_gib": None if held is None else round(held / GIB, 3),
                              "shape": list(images.shape), "finite": bool(torch.isfinite(images).all().item()), "checksum": images.float().mean().item(),
                              "build_s": round(build_s, 1), "steps": call["num_inference_steps"], "torch": torch.__version__, "diffusers": diffusers.__version__,
                              **({"caches": caches} if caches is not None else {})}), flush=True)
            del pipe, images
        except Exception as e:  # noqa: BLE001 (one pipeline's failure is a line; the next still runs)
            print(json.dumps({**base, "error": f"{type(e).__name__}: {str(e)[:400]}"}), flush=True)
        if device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
