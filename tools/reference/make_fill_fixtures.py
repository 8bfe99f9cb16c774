"""diffusers references for @dtorch/hf's FluxFillPipeline on the built-in tiny-flux-fill.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_fill_fixtures.py
Builds tiny-flux-fill (packages/hf/assets/tiny-pipelines/tiny-flux-fill.json: tiny-flux with a
FLUX.1-Fill transformer, 384 channels in) as make_flux_pipeline_fixtures.py builds tiny-flux,
makes diffusers' FluxFillPipeline from its components, and runs the cases below on the pictures
and masks make_img2img_fixtures.py and make_inpaint_fixtures.py wrote (at the target size).
Writes to tests/fixtures/hf/pipelines/:
  tiny-fill.safetensors      float32, for each case <name>: "<name>.latent" and "<name>.image"
  tiny-fill-cases.json       each case's arguments (files, size, steps, seed, ...)
"""
import json
import pathlib
import sys

import torch
from diffusers import FluxFillPipeline
from PIL import Image
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_flux_pipeline_fixtures as flux_fixtures  # noqa: E402
import tiny_pipeline_assets  # noqa: E402
from image_pipeline_cases import run_cases  # noqa: E402

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

CASES = [
    # the defaults' shape: strength 1 (the start is noise), guidance 30
    {"name": "fill-one", "prompt": "a red circle", "image": ["img2img-a.png"], "mask_image": ["inpaint-mask-a.png"],
     "height": 64, "width": 64, "num_inference_steps": 3, "seed": 0, "max_sequence_length": 16},
    # two prompts, two pictures, one mask; strength 0.75
    {"name": "fill-two", "prompt": ["a blue square", "a green triangle"], "image": ["img2img-a.png", "img2img-b.png"],
     "mask_image": ["inpaint-mask-b.png"], "height": 64, "width": 64, "strength": 0.75, "num_inference_steps": 4, "seed": 1,
     "max_sequence_length": 8, "guidance_scale": 10.0},
]



@torch.no_grad()
def main():
    files = {p.name: Image.open(p).convert("RGB") for p in out.glob("img2img-*.png")}
    files.update({p.name: Image.open(p) for p in out.glob("inpaint-mask-*.png")})
    # tiny-flux's builder on the Fill spec
    spec = tiny_pipeline_assets.tiny_spec("tiny-flux-fill")
    flux_fixtures.tiny_spec = lambda _name: spec
    t2i, _ = flux_fixtures.build()
    pipe = FluxFillPipeline(**{k: v for k, v in t2i.components.items() if k not in ("image_encoder", "feature_extractor")})
    pipe.set_progress_bar_config(disable=True)
    tensors = run_cases(CASES, lambda case: pipe, files)
    save_file(tensors, out / "tiny-fill.safetensors")
    (out / "tiny-fill-cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    for k, v in tensors.items():
        print(k, list(v.shape))


if __name__ == "__main__":
    main()
