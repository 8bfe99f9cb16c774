"""diffusers references for @dtorch/hf's inpainting pipelines on the built-in tiny pipelines.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_inpaint_fixtures.py
Builds tiny-flux and tiny-sd3 as make_flux_pipeline_fixtures.py and make_sd3_pipeline_fixtures.py
do, makes FluxInpaintPipeline and StableDiffusion3InpaintPipeline from their components
(from_pipe), reads the pictures make_img2img_fixtures.py wrote, draws two masks with PIL (written
as PNGs at the pictures' size, so that no resampling is compared), and runs the cases below.
Writes to tests/fixtures/hf/pipelines/:
  inpaint-mask-a.png, inpaint-mask-b.png   the masks (64x64, grey: white is redrawn)
  tiny-inpaint.safetensors                 float32, for each case <name>: "<name>.latent" and
                                           "<name>.image" ([B, 3, H, W] in [0, 1])
  tiny-inpaint-cases.json                  each case's arguments (pipeline, files, ...)
"""
import json
import pathlib
import sys
import tempfile

import torch
from diffusers import FluxInpaintPipeline, StableDiffusion3InpaintPipeline
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
    # Flux: strength 0.8 of 5 steps, the default guidance (7.0)
    {"name": "flux-inpaint-one", "pipeline": "flux", "prompt": "a red circle", "image": ["img2img-a.png"], "mask_image": ["inpaint-mask-a.png"],
     "height": 64, "width": 64, "strength": 0.8, "num_inference_steps": 5, "seed": 0, "max_sequence_length": 16},
    # two prompts, two pictures, one mask for both
    {"name": "flux-inpaint-two", "pipeline": "flux", "prompt": ["a blue square", "a green triangle"], "image": ["img2img-a.png", "img2img-b.png"],
     "mask_image": ["inpaint-mask-b.png"], "height": 64, "width": 64, "num_inference_steps": 4, "seed": 1, "max_sequence_length": 8},
    # SD3: classifier-free guidance, strength 0.7
    {"name": "sd3-inpaint-one", "pipeline": "sd3", "prompt": "a red circle", "image": ["img2img-b.png"], "mask_image": ["inpaint-mask-a.png"],
     "height": 64, "width": 64, "strength": 0.7, "num_inference_steps": 4, "seed": 2, "max_sequence_length": 16},
    # two prompts, one picture and one mask repeated, strength 1 (pure noise inside the mask)
    {"name": "sd3-inpaint-two", "pipeline": "sd3", "prompt": ["a blue square", "a green triangle"], "image": ["img2img-a.png"],
     "mask_image": ["inpaint-mask-b.png"], "height": 64, "width": 64, "strength": 1.0, "num_inference_steps": 3, "seed": 3,
     "max_sequence_length": 8, "guidance_scale": 4.0},
]


def masks():
    def mask(shapes):
        img = Image.new("L", (64, 64), 0)
        draw = ImageDraw.Draw(img)
        for kind, box in shapes:
            (draw.ellipse if kind == "ellipse" else draw.rectangle)(box, fill=255)
        return img
    return {
        "inpaint-mask-a.png": mask([("ellipse", (8, 10, 40, 42))]),
        "inpaint-mask-b.png": mask([("rect", (20, 0, 44, 63)), ("ellipse", (0, 44, 18, 62))]),
    }



@torch.no_grad()
def main():
    for name, img in masks().items():
        img.save(out / name)
    files = {p.name: Image.open(p).convert("RGB") for p in out.glob("img2img-*.png")}
    files.update({name: Image.open(out / name) for name in masks()})
    flux_t2i, _ = flux_fixtures.build()
    with tempfile.TemporaryDirectory() as tmp:
        sd3_t2i, _ = sd3_fixtures.build(pathlib.Path(tmp), tiny_spec("tiny-sd3"))
    pipes = {"flux": FluxInpaintPipeline.from_pipe(flux_t2i), "sd3": StableDiffusion3InpaintPipeline.from_pipe(sd3_t2i)}
    for p in pipes.values():
        p.set_progress_bar_config(disable=True)
    tensors = run_cases(CASES, lambda case: pipes[case["pipeline"]], files)
    save_file(tensors, out / "tiny-inpaint.safetensors")
    (out / "tiny-inpaint-cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    for k, v in tensors.items():
        print(k, list(v.shape))


if __name__ == "__main__":
    main()
