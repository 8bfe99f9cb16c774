"""diffusers references for @dtorch/hf's AutoencoderKL: tiny VAEs and their outputs.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_autoencoder_kl_fixtures.py
Writes tests/fixtures/hf/models/<name>/ as save_pretrained writes it (config.json,
diffusion_pytorch_model.safetensors):
  autoencoder_kl         block_out_channels [4, 8, 8], norm_num_groups 2, 4 latent channels, quant convs (SD 1.x/XL-like),
                         sample_size 32 (tiles of 8 latents for tiled decoding)
  autoencoder_kl-16ch    block_out_channels [8, 8], norm_num_groups 4, 16 latent channels, no quant convs, a shift factor
                         (SD3/Flux-like)
  autoencoder_kl-bf16    autoencoder_kl-16ch saved in bfloat16
  autoencoder_kl-legacy  autoencoder_kl with the mid attention under the older names
                         (query, key, value, proj_attn), as diffusers' loader still accepts them
and autoencoder_kl_io.safetensors beside them, for each <name> (float32):
  "<name>.images", "<name>.latents"   the inputs of encode and decode
  "<name>.mean", "<name>.logvar"      encode(images).latent_dist.mean / .logvar
  "<name>.sample"                     latent_dist.sample(torch.Generator().manual_seed(7))
  "<name>.decoded"                    decode(latents).sample
  "autoencoder_kl.tiled.latents", "autoencoder_kl.tiled.decoded"   enable_tiling(); decode(...)
  "autoencoder_kl.tiled.images", "autoencoder_kl.tiled.mean", ".logvar"   enable_tiling(); encode(...)
  "autoencoder_kl-bf16.decoded"       decode by the bfloat16 weights held in float32
  "autoencoder_kl-16ch.bf16.decoded", "autoencoder_kl-16ch.bf16.mean"   weights and compute in bfloat16
"""
import copy
import json
import pathlib
import shutil

import torch
from diffusers import AutoencoderKL
from safetensors.torch import load_file, save_file

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "models"
SEED = 7


def perturb(model, seed):
    """Norm weights and biases start at 1 and 0: give every parameter values so a wrong one shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def build(seed, **config):
    torch.manual_seed(seed)
    model = AutoencoderKL(**config).eval()
    perturb(model, seed + 1)
    return model


def save(model, name):
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    return folder


def references(io, name, model, images, latents):
    with torch.no_grad():
        dist = model.encode(images).latent_dist
        io[f"{name}.images"] = images
        io[f"{name}.latents"] = latents
        io[f"{name}.mean"] = dist.mean
        io[f"{name}.logvar"] = dist.logvar
        io[f"{name}.sample"] = dist.sample(torch.Generator().manual_seed(SEED))
        io[f"{name}.decoded"] = model.decode(latents).sample


def main():
    g = torch.Generator().manual_seed(0)
    io = {}
    blocks = lambda n: dict(down_block_types=["DownEncoderBlock2D"] * n, up_block_types=["UpDecoderBlock2D"] * n)

    sd = build(1, block_out_channels=[4, 8, 8], layers_per_block=1, norm_num_groups=2, latent_channels=4, sample_size=32, **blocks(3))
    save(sd, "autoencoder_kl")
    references(io, "autoencoder_kl", sd, torch.randn(2, 3, 32, 32, generator=g), torch.randn(2, 4, 8, 8, generator=g))
    tiled = torch.randn(1, 4, 12, 12, generator=g)  # 2 x 2 tiles of 8 (step 6), the last ones cut to 6
    tiled_images = torch.randn(1, 3, 48, 48, generator=g)  # 2 x 2 tiles of 32 (step 24), the last ones cut to 24
    sd.enable_tiling()
    with torch.no_grad():
        io["autoencoder_kl.tiled.latents"] = tiled
        io["autoencoder_kl.tiled.decoded"] = sd.decode(tiled).sample
        io["autoencoder_kl.tiled.images"] = tiled_images
        dist = sd.encode(tiled_images).latent_dist
        io["autoencoder_kl.tiled.mean"] = dist.mean
        io["autoencoder_kl.tiled.logvar"] = dist.logvar
    sd.disable_tiling()

    flux = build(3, block_out_channels=[8, 8], layers_per_block=1, norm_num_groups=4, latent_channels=16, use_quant_conv=False,
                 use_post_quant_conv=False, scaling_factor=1.5305, shift_factor=0.0609, sample_size=16, **blocks(2))
    save(flux, "autoencoder_kl-16ch")
    references(io, "autoencoder_kl-16ch", flux, torch.randn(2, 3, 16, 16, generator=g), torch.randn(2, 16, 8, 8, generator=g))

    # weights and compute in bfloat16
    half = copy.deepcopy(flux).to(torch.bfloat16)
    with torch.no_grad():
        io["autoencoder_kl-16ch.bf16.decoded"] = half.decode(io["autoencoder_kl-16ch.latents"].bfloat16()).sample.float()
        io["autoencoder_kl-16ch.bf16.mean"] = half.encode(io["autoencoder_kl-16ch.images"].bfloat16()).latent_dist.mean.float()

    # the same weights saved in bfloat16; the reference runs them held in float32
    bf16 = save(flux.to(torch.bfloat16), "autoencoder_kl-bf16")
    flux.float()
    rounded = AutoencoderKL.from_pretrained(bf16, torch_dtype=torch.float32).eval()
    with torch.no_grad():
        io["autoencoder_kl-bf16.decoded"] = rounded.decode(io["autoencoder_kl-16ch.latents"]).sample

    # the older attention names, written by hand into a copy of autoencoder_kl
    legacy = out / "autoencoder_kl-legacy"
    shutil.rmtree(legacy, ignore_errors=True)
    shutil.copytree(out / "autoencoder_kl", legacy)
    weights = load_file(legacy / "diffusion_pytorch_model.safetensors")
    names = {"to_q": "query", "to_k": "key", "to_v": "value", "to_out.0": "proj_attn"}
    renamed = {}
    for key, value in weights.items():
        for new, old in names.items():
            key = key.replace(f".attentions.0.{new}.", f".attentions.0.{old}.")
        renamed[key] = value
    assert any(".proj_attn." in k for k in renamed)
    save_file(renamed, legacy / "diffusion_pytorch_model.safetensors", metadata={"format": "pt"})

    save_file({k: v.contiguous() for k, v in io.items()}, out / "autoencoder_kl_io.safetensors")
    total = sum(f.stat().st_size for f in out.glob("autoencoder_kl*/**/*") if f.is_file()) + (out / "autoencoder_kl_io.safetensors").stat().st_size
    print(json.dumps({"fixtures_bytes": total}))


if __name__ == "__main__":
    main()
