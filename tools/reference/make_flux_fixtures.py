"""diffusers references for @dtorch/hf's FluxTransformer2DModel: two tiny models.

Run from the repository root with the setup's Python (torch, safetensors) and diffusers' source:
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_flux_fixtures.py
Writes tests/fixtures/hf/models/<name>/transformer/ as save_pretrained writes it (config.json,
diffusion_pytorch_model.safetensors), and tests/fixtures/hf/models/flux-io.safetensors with the
inputs and diffusers' outputs:
  flux-dev       guidance_embeds true (the guidance-distilled FLUX.1-dev layout)
  flux-schnell   guidance_embeds false (FLUX.1-schnell)
Both: 1 double and 1 single block, 2 heads of 16, joint_attention_dim 32, pooled 16, 16 input
channels, axes_dims_rope [4, 6, 6]. Inputs per <name>: "<name>.hidden_states" [2, 16, 16] (a 4x4
grid of image tokens), "<name>.encoder_hidden_states" [2, 8, 32], "<name>.pooled_projections"
[2, 16], "<name>.timestep" [2] (in [0, 1]: the model multiplies by 1000), "<name>.guidance" [2]
(dev), "<name>.img_ids" [16, 3], "<name>.txt_ids" [8, 3] (distinct, so that a wrong order of text
and image tokens shows), and the output "<name>.sample" [2, 16, 16]; "<name>.bf16.sample": weights, activations and the
inputs (but the ids) in bfloat16, as the Flux pipeline runs; all stored as float32. Weights are
diffusers' own initialisation from a fixed seed; norm weights and biases perturbed so that a
wrong one shows.
tests/fixtures/hf/models/flux_state_dict_shapes.json: FLUX.1-dev's config (diffusers' defaults with
guidance_embeds true) and every state-dict key with its shape, built on the meta device (no
weights), and the keys FLUX.1-schnell's (guidance_embeds false) lacks beside them.
tests/fixtures/hf/models/flux_rotary.safetensors: the rotary tables of FLUX.1-dev's pos_embed (its
FluxPosEmbed, as the model builds it: theta 10000, axes_dims_rope [16, 56, 56]) at large position
ids: "ids" [32, 3] (hundreds to thousands, as a large image's or a long prompt's), "cos" and "sin"
[32, 128] (float32), where a wrong rotary base shows (the tiny models see small positions only).
"""
import json
import pathlib
import shutil

import torch
from diffusers import FluxTransformer2DModel
from safetensors.torch import save_file
from fixture_weights import perturb

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "models"

BATCH, IMG_SIDE, TXT = 2, 4, 8




def run(name, guidance_embeds, seed, io):
    torch.manual_seed(seed)
    model = FluxTransformer2DModel(
        patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=16,
        guidance_embeds=guidance_embeds, axes_dims_rope=(4, 6, 6),
    ).eval()
    perturb(model, seed)
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder / "transformer")
    g = torch.Generator().manual_seed(seed + 100)
    img = IMG_SIDE * IMG_SIDE
    hidden = torch.randn(BATCH, img, 16, generator=g)
    context = torch.randn(BATCH, TXT, 32, generator=g)
    pooled = torch.randn(BATCH, 16, generator=g)
    timestep = torch.tensor([0.7, 0.25])
    guidance = torch.tensor([3.5, 5.0]) if guidance_embeds else None
    img_ids = torch.zeros(IMG_SIDE, IMG_SIDE, 3)
    img_ids[..., 1] = torch.arange(IMG_SIDE)[:, None]
    img_ids[..., 2] = torch.arange(IMG_SIDE)[None, :]
    img_ids = img_ids.reshape(img, 3)
    txt_ids = torch.randint(0, 7, (TXT, 3), generator=g).float()
    with torch.no_grad():
        sample = model(
            hidden_states=hidden, encoder_hidden_states=context, pooled_projections=pooled, timestep=timestep,
            img_ids=img_ids, txt_ids=txt_ids, guidance=guidance,
        ).sample
        bf16 = model.to(torch.bfloat16)
        b = lambda t: None if t is None else t.to(torch.bfloat16)  # noqa: E731
        io[f"{name}.bf16.sample"] = bf16(
            hidden_states=b(hidden), encoder_hidden_states=b(context), pooled_projections=b(pooled), timestep=b(timestep),
            img_ids=img_ids, txt_ids=txt_ids, guidance=b(guidance),
        ).sample.float()
    io[f"{name}.hidden_states"] = hidden
    io[f"{name}.encoder_hidden_states"] = context
    io[f"{name}.pooled_projections"] = pooled
    io[f"{name}.timestep"] = timestep
    if guidance is not None:
        io[f"{name}.guidance"] = guidance
    io[f"{name}.img_ids"] = img_ids
    io[f"{name}.txt_ids"] = txt_ids
    io[f"{name}.sample"] = sample


def state_dict_shapes():
    with torch.device("meta"):
        dev = FluxTransformer2DModel(guidance_embeds=True)
        schnell = FluxTransformer2DModel(guidance_embeds=False)
    keys = {k: list(v.shape) for k, v in dev.state_dict().items()}
    schnell_keys = {k: list(v.shape) for k, v in schnell.state_dict().items()}
    assert all(keys[k] == v for k, v in schnell_keys.items())
    shapes = {
        "config": {k: v for k, v in dev.config.items() if not k.startswith("_")},
        "keys": keys,
        "schnell_lacks": sorted(set(keys) - set(schnell_keys)),
    }
    (out / "flux_state_dict_shapes.json").write_text(json.dumps(shapes, separators=(",", ":")))


def rotary_tables():
    with torch.device("meta"):
        pos_embed = FluxTransformer2DModel(guidance_embeds=True).pos_embed
    g = torch.Generator().manual_seed(21)
    ids = torch.randint(100, 4096, (32, 3), generator=g).float()
    ids[:4] = torch.tensor([[0, 0, 0], [1, 127, 255], [511, 1023, 2047], [4095, 3000, 4000]])
    cos, sin = pos_embed(ids)
    save_file({"ids": ids, "cos": cos.contiguous(), "sin": sin.contiguous()}, str(out / "flux_rotary.safetensors"))


def main():
    out.mkdir(parents=True, exist_ok=True)
    state_dict_shapes()
    rotary_tables()
    io = {}
    run("flux-dev", True, 11, io)
    run("flux-schnell", False, 12, io)
    save_file({k: v.contiguous() for k, v in io.items()}, str(out / "flux-io.safetensors"))
    for f in sorted(out.glob("flux*")):
        for g in [f] if f.is_file() else sorted(f.rglob("*")):
            if g.is_file():
                print(g.relative_to(root), g.stat().st_size)


if __name__ == "__main__":
    main()
