"""diffusers references for @dtorch/hf's image-to-image pipelines on the built-in tiny pipelines.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_img2img_fixtures.py
Builds tiny-flux and tiny-sd3 as make_flux_pipeline_fixtures.py and make_sd3_pipeline_fixtures.py
do, makes FluxImg2ImgPipeline and StableDiffusion3Img2ImgPipeline from their components
(from_pipe), draws two small test pictures with PIL (written as PNGs: the inputs the tests read,
already at the target sizes, so that no resampling is compared), and runs the cases below.
Writes to tests/fixtures/hf/pipelines/:
  img2img-a.png, img2img-b.png     the input pictures (64x64 and 64x64, RGB)
  img2img-wide.png                 a 64x32 (width x height) picture
  tiny-img2img.safetensors         float32, for each case <name>: "<name>.latent" (output_type
                                   "latent") and "<name>.image" (output_type "pt", [B, 3, H, W] in [0, 1])
  tiny-img2img-cases.json          each case's arguments (pipeline, images by file name, ...)
"""
import json
import pathlib
import sys
import tempfile

import numpy as np
import torch
from diffusers import FluxImg2ImgPipeline, StableDiffusion3Img2ImgPipeline
from PIL import Image, ImageDraw
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_flux_pipeline_fixtures as flux_fixtures  # noqa: E402
import make_sd3_pipeline_fixtures as sd3_fixtures  # noqa: E402
from image_pipeline_cases import run_cases  # noqa: E402
from tiny_pipeline_assets import tiny_spec  # noqa: E402

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

CASES = [
    # Flux: one picture, strength 0.6 of 5 steps (3 run), guidance 7.0 (the img2img default)
    {"name": "flux-one", "pipeline": "flux", "prompt": "a red circle", "image": ["img2img-a.png"], "height": 64, "width": 64,
     "num_inference_steps": 5, "seed": 0, "max_sequence_length": 16},
    # two prompts, one picture each, strength 0.9, not square
    {"name": "flux-two", "pipeline": "flux", "prompt": ["a blue square", "a green triangle"], "image": ["img2img-wide.png", "img2img-wide.png"],
     "height": 32, "width": 64, "strength": 0.9, "num_inference_steps": 4, "seed": 1, "max_sequence_length": 8},
    # one picture for two images of one prompt (repeated to the batch), true CFG
    {"name": "flux-cfg", "pipeline": "flux", "prompt": "a lighthouse", "negative_prompt": "blurry", "true_cfg_scale": 3.0,
     "image": ["img2img-b.png"], "num_images_per_prompt": 2, "height": 64, "width": 64, "strength": 0.5, "num_inference_steps": 4,
     "seed": 2, "max_sequence_length": 8},
    # SD3: classifier-free guidance (7.0), strength 0.6 of 5 steps
    {"name": "sd3-one", "pipeline": "sd3", "prompt": "a red circle", "image": ["img2img-a.png"], "height": 64, "width": 64,
     "num_inference_steps": 5, "seed": 0, "max_sequence_length": 16},
    # two prompts and two pictures, strength 0.8
    {"name": "sd3-two", "pipeline": "sd3", "prompt": ["a blue square", "a green triangle"], "image": ["img2img-a.png", "img2img-b.png"],
     "height": 64, "width": 64, "strength": 0.8, "num_inference_steps": 3, "seed": 3, "max_sequence_length": 8, "guidance_scale": 4.0},
]


def pictures():
    """Small test pictures: gradients with shapes, deterministic."""
    def picture(width, height, shapes):
        y, x = np.mgrid[0:height, 0:width]
        rgb = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) * 127 // (width + height)], -1).astype(np.uint8)
        img = Image.fromarray(rgb, "RGB")
        draw = ImageDraw.Draw(img)
        for kind, box, colour in shapes:
            (draw.ellipse if kind == "ellipse" else draw.rectangle)(box, fill=colour)
        return img
    return {
        "img2img-a.png": picture(64, 64, [("ellipse", (10, 12, 40, 44), (230, 30, 30)), ("rect", (44, 40, 60, 60), (20, 20, 200))]),
        "img2img-b.png": picture(64, 64, [("rect", (8, 8, 30, 56), (240, 240, 240)), ("ellipse", (34, 20, 58, 44), (30, 160, 40))]),
        "img2img-wide.png": picture(64, 32, [("ellipse", (4, 4, 28, 28), (250, 200, 0))]),
    }



@torch.no_grad()
def main():
    out.mkdir(parents=True, exist_ok=True)
    images = pictures()
    for name, img in images.items():
        img.save(out / name)
    # the tests read the PNGs: run diffusers on the same decoded pictures
    images = {name: Image.open(out / name).convert("RGB") for name in images}
    flux_t2i, _ = flux_fixtures.build()
    with tempfile.TemporaryDirectory() as tmp:
        sd3_t2i, _ = sd3_fixtures.build(pathlib.Path(tmp), tiny_spec("tiny-sd3"))
    pipes = {"flux": FluxImg2ImgPipeline.from_pipe(flux_t2i), "sd3": StableDiffusion3Img2ImgPipeline.from_pipe(sd3_t2i)}
    for p in pipes.values():
        p.set_progress_bar_config(disable=True)
    tensors = run_cases(CASES, lambda case: pipes[case["pipeline"]], images)
    save_file(tensors, out / "tiny-img2img.safetensors")
    (out / "tiny-img2img-cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    for k, v in tensors.items():
        print(k, list(v.shape))


if __name__ == "__main__":
    main()
