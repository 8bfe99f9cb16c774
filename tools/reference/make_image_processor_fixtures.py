"""diffusers references for @dtorch/hf's images in: decoding (diffusers' load_image) and VaeImageProcessor.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_image_processor_fixtures.py
Writes tests/fixtures/hf/images/:
  rgb.png, photo.jpg, photo.webp   32x48 (height x width) RGB: a gradient with noise (JPEG quality 90, 4:2:0; WebP lossless)
  rgba.png, la.png, palette.png    the same picture as RGBA (alpha a ramp), grey + alpha, 16-colour palette
  g16.png, rgb16.png               16-bit grey and 16-bit RGB (the latter written by hand: PIL writes no 16-bit RGB PNG)
  cmyk.jpg                         the picture as a CMYK JPEG (PIL writes Adobe-inverted CMYK)
  mask.png                         32x48 grey mask: a rectangle of 255, a ramp of greys around 128, the rest 0
  odd.png                          37x50 RGB, for resizing to multiples of 16
  images.json                      get_crop_region cases: [mask, width, height, pad] and diffusers' (x1, y1, x2, y2)
  images.safetensors               (uint8 pixels [H, W, C]; float32 tensors [B, C, H, W]):
    "decoded.<file>"       np.array(load_image(file)): exif_transpose, convert("RGB"); for g16.png the high
                           byte of each value instead (PIL clips I;16 to 255, see docs/hf.md "Images in")
    "raw.rgba"             np.array(Image.open("rgba.png")), the RGBA pixels as canvas ImageData holds them
    "preprocess.<file>"    VaeImageProcessor(vae_scale_factor=16).preprocess(load_image(file)) (no resize: 32x48),
                           for rgb.png, photo.jpg and rgba.png
    "preprocess.batch"     preprocess([rgb.png, photo.jpg])
    "mask.<file>"          the inpainting mask processor's preprocess (pipeline_flux_inpaint.py's mask_processor)
    "grey.rgb.png"         VaeImageProcessor(16, do_normalize=False, do_convert_grayscale=True): PIL's L
    "resize.*"             resized by PIL's Lanczos: odd.png to 32x48; rgb.png to 48x64; fill and crop modes
    "crop.*"               preprocess(..., crops_coords=...), inside the image and past its edge
    "tensor.input", "tensor.preprocess"   a [1, 3, 37, 50] tensor in [0, 1] and its preprocess (nearest resize)
    "blur.mask", "blur.rgb"   VaeImageProcessor.blur(load_image(file), blur_factor) as uint8 RGB
    "overlay.plain", "overlay.crop"   apply_overlay(mask, rgb.png, photo.jpg[, get_crop_region(mask, 48, 32, 2)])
"""
import json
import pathlib
import struct
import zlib

import numpy as np
import torch
from PIL import Image
from diffusers.image_processor import VaeImageProcessor
from diffusers.utils import load_image
from safetensors.torch import save_file

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "images"
H, W = 32, 48


def picture(h, w, seed):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack([xx * 255 // (w - 1), yy * 255 // (h - 1), (xx + yy) * 7 % 256], -1)
    return np.clip(rgb + rng.integers(-24, 24, rgb.shape), 0, 255).astype(np.uint8)


def png16(pixels):
    """A 16-bit RGB PNG (colour type 2, bit depth 16) of uint16 [H, W, 3]."""
    h, w, _ = pixels.shape
    rows = b"".join(b"\x00" + pixels[i].astype(">u2").tobytes() for i in range(h))
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


def write_images():
    rgb = picture(H, W, 0)
    yy, xx = np.mgrid[0:H, 0:W]
    Image.fromarray(rgb).save(out / "rgb.png", optimize=True)
    Image.fromarray(rgb).save(out / "photo.jpg", quality=90)
    Image.fromarray(rgb).save(out / "photo.webp", lossless=True)
    Image.fromarray(rgb).convert("CMYK").save(out / "cmyk.jpg", quality=90)
    alpha = (xx * 5 % 256).astype(np.uint8)[..., None]
    Image.fromarray(np.concatenate([rgb, alpha], -1)).save(out / "rgba.png", optimize=True)
    Image.fromarray(rgb).convert("LA").save(out / "la.png", optimize=True)
    Image.fromarray(rgb).convert("P", palette=Image.ADAPTIVE, colors=16).save(out / "palette.png", optimize=True)
    Image.fromarray((xx * 1000 + yy * 37).astype(np.uint16)).save(out / "g16.png")
    rng = np.random.default_rng(1)
    (out / "rgb16.png").write_bytes(png16((rgb.astype(np.uint32) * 257 + rng.integers(0, 257, rgb.shape)).astype(np.uint16)))
    mask = np.zeros((H, W), np.uint8)
    mask[6:20, 10:30] = 255
    mask[24:28, 4:44] = np.linspace(100, 160, 40).astype(np.uint8)  # greys either side of binarize's 0.5
    Image.fromarray(mask, mode="L").save(out / "mask.png", optimize=True)
    Image.fromarray(picture(37, 50, 2)).save(out / "odd.png", optimize=True)


def pixels(image):
    return torch.from_numpy(np.array(image).copy())


def main():
    out.mkdir(parents=True, exist_ok=True)
    write_images()
    files = ["rgb.png", "photo.jpg", "photo.webp", "rgba.png", "la.png", "palette.png", "g16.png", "rgb16.png", "cmyk.jpg", "mask.png"]
    load = lambda name: load_image(str(out / name))
    t = {}
    for name in files:
        t[f"decoded.{name}"] = pixels(load(name))
    # PIL's convert("RGB") of I;16 clips each value to 255; the high byte is what PIL gives 16-bit RGB (and what we give both)
    g16 = np.array(Image.open(out / "g16.png")).astype(np.uint32) >> 8
    t["decoded.g16.png"] = torch.from_numpy(np.repeat(g16.astype(np.uint8)[..., None], 3, -1))
    t["raw.rgba"] = pixels(Image.open(out / "rgba.png"))

    processor = VaeImageProcessor(vae_scale_factor=16)
    for name in ["rgb.png", "photo.jpg", "rgba.png"]:  # the rest decode to exact pixels; preprocess is the same arithmetic
        t[f"preprocess.{name}"] = processor.preprocess(load(name))
    t["preprocess.batch"] = processor.preprocess([load("rgb.png"), load("photo.jpg")])

    # pipeline_flux_inpaint.py: vae_scale_factor * 2, the transformer's latent channels
    mask_processor = VaeImageProcessor(vae_scale_factor=16, vae_latent_channels=16, do_normalize=False, do_binarize=True, do_convert_grayscale=True)
    for name in ["mask.png", "rgb.png"]:
        t[f"mask.{name}"] = mask_processor.preprocess(load(name))
    t["grey.rgb.png"] = VaeImageProcessor(vae_scale_factor=16, do_normalize=False, do_convert_grayscale=True).preprocess(load("rgb.png"))

    t["resize.odd"] = processor.preprocess(load("odd.png"))
    t["resize.48x64"] = processor.preprocess(load("rgb.png"), height=48, width=64)
    t["resize.fill.48x48"] = processor.preprocess(load("rgb.png"), height=48, width=48, resize_mode="fill")
    t["resize.fill.32x80"] = processor.preprocess(load("rgb.png"), height=32, width=80, resize_mode="fill")
    t["resize.crop.48x48"] = processor.preprocess(load("rgb.png"), height=48, width=48, resize_mode="crop")
    t["resize.crop.32x80"] = processor.preprocess(load("rgb.png"), height=32, width=80, resize_mode="crop")
    t["resize.mask.odd"] = mask_processor.preprocess(load("odd.png"))
    t["crop.inside"] = processor.preprocess(load("rgb.png"), crops_coords=(4, 2, 36, 34))
    t["crop.edge"] = processor.preprocess(load("rgb.png"), crops_coords=(40, 0, 56, 16))

    torch.manual_seed(0)
    t["tensor.input"] = torch.rand(1, 3, 37, 50)
    t["tensor.preprocess"] = processor.preprocess(t["tensor.input"].clone())

    t["blur.mask"] = pixels(VaeImageProcessor.blur(load("mask.png"), blur_factor=4))
    t["blur.rgb"] = pixels(VaeImageProcessor.blur(load("rgb.png"), blur_factor=3))

    regions = []
    for w, h, pad in [(48, 32, 0), (48, 32, 2), (32, 32, 4), (16, 64, 0), (96, 16, 1)]:
        regions.append({"mask": "mask.png", "width": w, "height": h, "pad": pad, "region": list(VaeImageProcessor.get_crop_region(load("mask.png"), w, h, pad))})
    box = VaeImageProcessor.get_crop_region(load("mask.png"), W, H, 2)
    t["overlay.plain"] = pixels(processor.apply_overlay(load("mask.png"), load("rgb.png"), load("photo.jpg")))
    t["overlay.crop"] = pixels(processor.apply_overlay(load("mask.png"), load("rgb.png"), load("photo.jpg"), box))

    (out / "images.json").write_text(json.dumps({"cropRegions": regions, "overlayCrop": list(box)}) + "\n")
    save_file({k: v.contiguous() for k, v in t.items()}, out / "images.safetensors")
    total = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {len(t)} tensors, {len(regions)} crop regions to {out} ({total} bytes)")


if __name__ == "__main__":
    main()
