"""diffusers references for @dtorch/hf's FluxKontextPipeline on the built-in tiny-flux.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_kontext_fixtures.py
Builds tiny-flux as make_flux_pipeline_fixtures.py does (FLUX.1-Kontext's transformer has
FLUX.1's shape), makes diffusers' FluxKontextPipeline from its components, and runs the cases
below on the pictures make_img2img_fixtures.py wrote, with _auto_resize=False (the pictures stay
at their size, so no resampling is compared; the resolution choice is tested on its own).
Writes to tests/fixtures/hf/pipelines/:
  tiny-kontext.safetensors   float32, for each case <name>: "<name>.latent" and "<name>.image"
  tiny-kontext-cases.json    each case's arguments
"""
import json
import pathlib
import sys

import torch
from diffusers import FluxKontextPipeline
from diffusers.pipelines.flux.pipeline_flux_kontext import PREFERRED_KONTEXT_RESOLUTIONS
from PIL import Image
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_flux_pipeline_fixtures as flux_fixtures  # noqa: E402
from image_pipeline_cases import run_cases  # noqa: E402

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

CASES = [
    # a 64x64 reference for a 64x64 image: 16 + 16 tokens
    {"name": "kontext-one", "prompt": "make it night", "image": ["img2img-a.png"], "height": 64, "width": 64, "max_area": 4096,
     "num_inference_steps": 3, "seed": 0, "max_sequence_length": 16},
    # a 64x32 reference (8 tokens) for a 48x48 image (9 tokens): 17 tokens, uneven over two devices; two prompts
    {"name": "kontext-uneven", "prompt": ["add a hat", "make it red"], "image": ["img2img-wide.png"], "height": 48, "width": 48,
     "max_area": 2304, "num_inference_steps": 2, "seed": 1, "max_sequence_length": 8, "guidance_scale": 2.5},
    # no reference: text to image through Kontext
    {"name": "kontext-none", "prompt": "a cat", "height": 32, "width": 32, "max_area": 1024, "num_inference_steps": 2, "seed": 2,
     "max_sequence_length": 8},
]


@torch.no_grad()
def main():
    files = {p.name: Image.open(p).convert("RGB") for p in out.glob("img2img-*.png")}
    t2i, _ = flux_fixtures.build()
    pipe = FluxKontextPipeline(**{k: v for k, v in t2i.components.items()})
    pipe.set_progress_bar_config(disable=True)
    tensors = run_cases(CASES, lambda case: pipe, files, _auto_resize=False)
    save_file(tensors, out / "tiny-kontext.safetensors")
    # the resolution _auto_resize picks for some aspect ratios
    picks = {str(r): list(min((abs(r - w / h), w, h) for w, h in PREFERRED_KONTEXT_RESOLUTIONS)[1:]) for r in (0.3, 0.5, 0.75, 1.0, 1.2, 4 / 3, 2.0, 3.0)}
    (out / "tiny-kontext-cases.json").write_text(json.dumps({"cases": CASES, "auto_resize": picks}, indent=1) + "\n")
    for k, v in tensors.items():
        print(k, list(v.shape))


if __name__ == "__main__":
    main()
