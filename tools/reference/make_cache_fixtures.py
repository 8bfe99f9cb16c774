"""diffusers references for step caching (First-Block Cache, MagCache, TaylorSeer) in @dtorch/hf's Flux and SD3 pipelines.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_cache_fixtures.py
Builds the built-in tiny-flux and tiny-sd3 pipelines as make_flux_pipeline_fixtures.py and
make_sd3_pipeline_fixtures.py do, enables diffusers' First-Block Cache on the transformer
(`apply_first_block_cache(transformer, FirstBlockCacheConfig(threshold))`, hooks/first_block_cache.py,
what `enable_cache` applies)
and runs the cases below at fixed seeds. Random weights change between steps unlike trained
ones, so each case's threshold is chosen here from the statistic of an uncached run: the value
between two of the statistics (the head block's residual change, absmean(r - r_prev) /
absmean(r_prev)) that leaves some steps computed and some skipped, farthest from any statistic
of the cached run (a float32 rounding must not flip a decision).

diffusers' Flux pipeline runs the two branches of true CFG as two calls in cache contexts "cond"
and "uncond" (each its own cache); its SD3 pipeline runs CFG as one call on the batch [negative;
positive] and sets no context (nor has its transformer enable_cache), so the SD3 cases run in
context "cond" (and SD3's last block hands its text input on: see _text_through_last_block): one cache for
the batch, the statistic over both branches.

TaylorSeer (hooks/taylorseer_cache.py, `apply_taylorseer_cache(transformer, TaylorSeerCacheConfig(...))`)
runs the TAYLOR_CASES with their configs; their decisions are the first attention's (every
attention decides alike), their "statistic" null. MagCache (hooks/mag_cache.py, `apply_mag_cache`)
runs the MAG_CASES with FLUX_MAG_RATIOS (stretched to their steps) or calibrating, whose
statistics are the ratios diffusers prints. Writes tests/fixtures/hf/pipelines/:
  step-cache-cases.json    per case: pipeline, arguments, seed, threshold (First-Block Cache) or config
                           (MagCache, TaylorSeer), and per transformer call (in order) its context,
                           statistic (null where there is none) and whether the cached work ran
  step-cache.safetensors   "<case>.latent": the final latents (output_type="latent"), float32
"""
import json
import pathlib
import tempfile

import torch
from diffusers.hooks import FirstBlockCacheConfig, HookRegistry, MagCacheConfig, TaylorSeerCacheConfig, apply_first_block_cache, apply_mag_cache, apply_taylorseer_cache
from diffusers.hooks.mag_cache import _MAG_CACHE_BLOCK_HOOK, _MAG_CACHE_LEADER_BLOCK_HOOK, FLUX_MAG_RATIOS, MagCacheBlockHook, MagCacheHeadHook
from diffusers.hooks.first_block_cache import _FBC_BLOCK_HOOK, _FBC_LEADER_BLOCK_HOOK, FBCHeadBlockHook
from diffusers.hooks.taylorseer_cache import _TAYLORSEER_CACHE_HOOK, TaylorSeerCacheHook
from safetensors.torch import save_file

import make_flux_pipeline_fixtures as flux_fixtures
import make_sd3_pipeline_fixtures as sd3_fixtures
from tiny_pipeline_assets import tiny_spec

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

CASES = [
    {"name": "flux", "pipeline": "tiny-flux", "prompt": "a photo of a cat", "height": 64, "width": 64,
     "num_inference_steps": 10, "seed": 0, "max_sequence_length": 16},
    # true CFG: two calls per step, each branch its own cache
    {"name": "flux-cfg", "pipeline": "tiny-flux", "prompt": "a lighthouse at night", "negative_prompt": "blurry",
     "true_cfg_scale": 4.0, "height": 48, "width": 48, "num_inference_steps": 8, "seed": 2, "max_sequence_length": 12},
    # batched CFG (guidance 4.5, the default negative prompt): one cache for the batch of both branches
    {"name": "sd3", "pipeline": "tiny-sd3", "prompt": "a photo of a cat", "height": 32, "width": 32,
     "num_inference_steps": 10, "seed": 0, "max_sequence_length": 16},
]

# every decision of the head block's hook as it is taken: (context, statistic or None, computed)
decisions = []
_should_compute = FBCHeadBlockHook._should_compute_remaining_blocks


def _recording(self, residual):
    state = self.state_manager.get_state()
    stat = None
    if state.head_block_residual is not None:
        prev = state.head_block_residual
        stat = ((residual - prev).abs().mean() / prev.abs().mean()).item()
    computed = _should_compute(self, residual)
    decisions.append({"context": self.state_manager._current_context, "statistic": stat, "computed": computed})
    return computed


FBCHeadBlockHook._should_compute_remaining_blocks = _recording

# TaylorSeer: every hooked attention decides alike; the first one's decisions are recorded
_measure = TaylorSeerCacheHook._measure_should_compute
_taylor_first = []


def _taylor_recording(self):
    computed, state = _measure(self)
    if not _taylor_first:
        _taylor_first.append(self)
    if self is _taylor_first[0]:
        decisions.append({"context": self.state_manager._current_context, "statistic": None, "computed": bool(computed)})
    return computed, state


TaylorSeerCacheHook._measure_should_compute = _taylor_recording

# MagCache: the head hook's decision after each call; while calibrating, each call's ratio
_mag_forward = MagCacheHeadHook.new_forward
_mag_calibration = MagCacheBlockHook._perform_calibration_step


def _mag_recording(self, module, *args, **kwargs):
    out = _mag_forward(self, module, *args, **kwargs)
    state = self.state_manager.get_state()
    decisions.append({"context": self.state_manager._current_context, "statistic": None, "computed": bool(state.should_compute)})
    return out


def _mag_calibration_recording(self, state, residual):
    _mag_calibration(self, state, residual)
    decisions[-1]["statistic"] = state.calibration_ratios[-1]


MagCacheHeadHook.new_forward = _mag_recording
MagCacheBlockHook._perform_calibration_step = _mag_calibration_recording

# MagCache cases: diffusers' MagCacheConfig arguments (mag_ratios: FLUX_MAG_RATIOS unless calibrating)
MAG_CASES = [
    {"name": "mag-flux", "pipeline": "tiny-flux", "prompt": "a photo of a cat", "height": 64, "width": 64,
     "num_inference_steps": 12, "seed": 0, "max_sequence_length": 16, "config": {"threshold": 0.1, "max_skip_steps": 2, "num_inference_steps": 12}},
    {"name": "mag-flux-cfg", "pipeline": "tiny-flux", "prompt": "a lighthouse at night", "negative_prompt": "blurry",
     "true_cfg_scale": 4.0, "height": 48, "width": 48, "num_inference_steps": 10, "seed": 2, "max_sequence_length": 12,
     "config": {"threshold": 0.2, "retention_ratio": 0.3, "num_inference_steps": 10}},
    {"name": "mag-sd3", "pipeline": "tiny-sd3", "prompt": "a photo of a cat", "height": 32, "width": 32,
     "num_inference_steps": 10, "seed": 0, "max_sequence_length": 16, "config": {"threshold": 0.15, "num_inference_steps": 10}},
    # calibration: every block runs; the statistics are the ratios diffusers prints
    {"name": "mag-calibrate", "pipeline": "tiny-flux", "prompt": "a photo of a cat", "height": 32, "width": 32,
     "num_inference_steps": 5, "seed": 4, "max_sequence_length": 16, "config": {"calibrate": True, "num_inference_steps": 5}},
]

# TaylorSeer cases: diffusers' TaylorSeerCacheConfig arguments (taylor_factors_dtype by name)
TAYLOR_CASES = [
    # diffusers' defaults (interval 5 after 3 full steps, first order, bfloat16 factors)
    {"name": "taylor-flux", "pipeline": "tiny-flux", "prompt": "a photo of a cat", "height": 64, "width": 64,
     "num_inference_steps": 12, "seed": 0, "max_sequence_length": 16, "config": {}},
    # true CFG, second order, float32 factors, refreshed every 2 steps, the last two steps full
    {"name": "taylor-flux-cfg", "pipeline": "tiny-flux", "prompt": "a lighthouse at night", "negative_prompt": "blurry",
     "true_cfg_scale": 4.0, "height": 48, "width": 48, "num_inference_steps": 9, "seed": 2, "max_sequence_length": 12,
     "config": {"cache_interval": 2, "disable_cache_before_step": 2, "disable_cache_after_step": 7, "max_order": 2, "taylor_factors_dtype": "float32"}},
    {"name": "taylor-sd3", "pipeline": "tiny-sd3", "prompt": "a photo of a cat", "height": 32, "width": 32,
     "num_inference_steps": 8, "seed": 0, "max_sequence_length": 16, "config": {"cache_interval": 3, "disable_cache_before_step": 2, "max_order": 1}},
]


def _text_through_last_block(transformer):
    """SD3's last block (context_pre_only) returns no text tokens, on which diffusers' tail hook
    fails (None minus a tensor); it returns its text input instead, which the model drops anyway."""
    last = transformer.transformer_blocks[-1]
    if getattr(last, "context_pre_only", False) and not hasattr(last, "_fbc_reference_forward"):
        last._fbc_reference_forward = last.forward

        def forward(hidden_states, encoder_hidden_states, temb, **kwargs):
            text, hidden = last._fbc_reference_forward(hidden_states, encoder_hidden_states, temb, **kwargs)
            return (encoder_hidden_states if text is None else text), hidden

        last.forward = forward


def run(pipe, case, threshold):
    """The case's final latents and the decisions of its transformer calls, under First-Block Cache at `threshold`."""
    _text_through_last_block(pipe.transformer)
    # apply_first_block_cache is what enable_cache calls (SD3's transformer has no CacheMixin)
    apply_first_block_cache(pipe.transformer, FirstBlockCacheConfig(threshold=threshold))
    return generate(pipe, case, (_FBC_LEADER_BLOCK_HOOK, _FBC_BLOCK_HOOK))


def run_taylor(pipe, case):
    """The case's final latents and decisions under TaylorSeer with the case's config."""
    config = dict(case["config"])
    if "taylor_factors_dtype" in config:
        config["taylor_factors_dtype"] = getattr(torch, config["taylor_factors_dtype"])
    apply_taylorseer_cache(pipe.transformer, TaylorSeerCacheConfig(**config))
    _taylor_first.clear()
    return generate(pipe, case, (_TAYLORSEER_CACHE_HOOK,))


def run_mag(pipe, case):
    """The case's final latents and decisions under MagCache with the case's config."""
    config = dict(case["config"])
    if not config.get("calibrate"):
        config["mag_ratios"] = FLUX_MAG_RATIOS
    apply_mag_cache(pipe.transformer, MagCacheConfig(**config))
    return generate(pipe, case, (_MAG_CACHE_LEADER_BLOCK_HOOK, _MAG_CACHE_BLOCK_HOOK))


def generate(pipe, case, hooks):
    """The case's final latents and recorded decisions with the hooks applied; the hooks removed after."""
    registry = HookRegistry.check_if_exists_or_initialize(pipe.transformer)
    registry._child_registries_cache = None  # the blocks' registries may be new (see bench/hf/pipelines.py)
    decisions.clear()
    args = {k: v for k, v in case.items() if k not in ("name", "pipeline", "seed", "threshold", "calls", "config")}
    generator = torch.Generator("cpu").manual_seed(case["seed"])
    try:
        if case["pipeline"] == "tiny-sd3":
            # diffusers' SD3 pipeline sets no cache context: one for the batched call
            HookRegistry.check_if_exists_or_initialize(pipe.transformer)._set_context("cond")
            latents = pipe(**args, generator=generator, output_type="latent").images
        else:
            latents = pipe(**args, generator=generator, output_type="latent").images
    finally:
        for hook in hooks:
            registry.remove_hook(hook, recurse=True)
    return latents.float().contiguous(), [dict(d) for d in decisions]


def choose_threshold(pipe, case):
    """A threshold that computes some steps and skips others, far from every statistic it meets."""
    _, uncached = run(pipe, case, 0.0)
    stats = sorted(d["statistic"] for d in uncached if d["statistic"] is not None)
    best = None
    for lo, hi in zip(stats, stats[1:]):
        threshold = (lo + hi) / 2
        _, calls = run(pipe, case, threshold)
        computed = sum(d["computed"] for d in calls)
        if computed == len(calls) or computed <= len({d["context"] for d in calls}):
            continue  # nothing skipped, or only the first calls computed
        margin = min(abs(d["statistic"] - threshold) / threshold for d in calls if d["statistic"] is not None)
        if best is None or margin > best[0]:
            best = (margin, threshold)
    assert best is not None and best[0] > 1e-3, f"{case['name']}: no threshold leaves a clear mix of computed and skipped calls"
    return float(f"{best[1]:.6g}")


@torch.no_grad()
def main():
    pipes = {}
    tmp = tempfile.TemporaryDirectory()
    pipes["tiny-flux"], _ = flux_fixtures.build()
    pipes["tiny-sd3"], _ = sd3_fixtures.build(tmp.name, tiny_spec("tiny-sd3"))
    for pipe in pipes.values():
        pipe.set_progress_bar_config(disable=True)
    tensors = {}
    cases = []
    for case in CASES:
        pipe = pipes[case["pipeline"]]
        threshold = choose_threshold(pipe, case)
        latents, calls = run(pipe, case, threshold)
        tensors[f"{case['name']}.latent"] = latents
        cases.append({**case, "threshold": threshold, "calls": calls})
        print(case["name"], "threshold", threshold, "computed", sum(c["computed"] for c in calls), "of", len(calls))
    for case in MAG_CASES:
        latents, calls = run_mag(pipes[case["pipeline"]], case)
        tensors[f"{case['name']}.latent"] = latents
        cases.append({**case, "calls": calls})
        print(case["name"], "computed", sum(c["computed"] for c in calls), "of", len(calls))
    for case in TAYLOR_CASES:
        latents, calls = run_taylor(pipes[case["pipeline"]], case)
        tensors[f"{case['name']}.latent"] = latents
        cases.append({**case, "calls": calls})
        print(case["name"], "computed", sum(c["computed"] for c in calls), "of", len(calls))
    tmp.cleanup()
    save_file(tensors, out / "step-cache.safetensors")
    (out / "step-cache-cases.json").write_text(json.dumps(cases, indent=1) + "\n")


if __name__ == "__main__":
    main()
