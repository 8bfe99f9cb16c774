"""diffusers references for @dtorch/hf's SD3Transformer2DModel: two tiny MMDiTs.

Run from the repository root with the setup's Python and diffusers' sources:
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_sd3_fixtures.py
Writes tests/fixtures/hf/models/<name>/transformer/ as SD3Transformer2DModel.save_pretrained
writes it (config.json, diffusion_pytorch_model.safetensors; the subfolder of a pipeline), and
tests/fixtures/hf/models/sd3_io.safetensors with the inputs and diffusers' outputs (batch 2):
  sd3-medium   SD3 style: no qk norm, no dual attention (the last block context_pre_only)
  sd3.5        SD3.5 style: qk_norm "rms_norm", dual_attention_layers [0], 4 heads of 4
io, for each <name>: "<name>.hidden_states" [2, 4, 8, 6] (a latent smaller than the
  pos_embed_max_size grid, not square, so the crop is off-centre on one axis),
  "<name>.encoder_hidden_states" [2, 5, 16], "<name>.pooled_projections" [2, 8],
  "<name>.timestep" [2] (float32), "<name>.sample" [2, 4, 8, 6];
  "<name>.bf16.sample": the model and inputs in bfloat16 (stored as float32);
  "<name>.skip_layers_0.sample": with skip_layers [0] (SD3.5's skip-layer guidance);
  "<name>.controlnet.residual" [2, 12, 16] and "<name>.controlnet.sample": with it as the one
  block_controlnet_hidden_states entry (added after every block but the context_pre_only last).
tests/fixtures/hf/models/sd3_state_dict_shapes.json: for the configs of the released checkpoints
(sd3-medium, sd3.5-medium, sd3.5-large, as their transformer/config.json give them), the config and
every state-dict key with its shape (built on the meta device: no weights).
Weights are diffusers' initialisation from a fixed seed; norm weights and biases perturbed so a
wrong one shows. pos_embed.pos_embed is diffusers' own buffer (persistent: it is in the file).
"""
import json
import pathlib
import shutil

import torch
from safetensors.torch import save_file
from diffusers import SD3Transformer2DModel

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "models"

TINY = dict(
    sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8, num_attention_heads=2,
    joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=8, out_channels=4, pos_embed_max_size=16,
)
CASES = {
    "sd3-medium": dict(TINY),
    # 4 heads of 4: heads split over tp=2 x ulysses=2
    "sd3.5": dict(TINY, attention_head_dim=4, num_attention_heads=4, qk_norm="rms_norm", dual_attention_layers=(0,)),
}


def perturb(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith(".weight") and p.ndim == 1:
                p.add_(torch.randn(p.shape, generator=g) * 0.2)


def run(name, kwargs, seed, io):
    torch.manual_seed(seed)
    model = SD3Transformer2DModel(**kwargs).eval()
    perturb(model, seed)
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder / "transformer")
    g = torch.Generator().manual_seed(seed + 100)
    x = torch.randn(2, 4, 8, 6, generator=g)
    ctx = torch.randn(2, 5, 16, generator=g)
    pooled = torch.randn(2, 8, generator=g)
    t = torch.tensor([981.0, 37.5])
    with torch.no_grad():
        sample = model(hidden_states=x, encoder_hidden_states=ctx, pooled_projections=pooled, timestep=t).sample
        skipped = model(hidden_states=x, encoder_hidden_states=ctx, pooled_projections=pooled, timestep=t, skip_layers=[0]).sample
        control = torch.randn(1, 2, 12, 16, generator=g)[0]  # one residual for both blocks (the last one takes none)
        controlled = model(
            hidden_states=x, encoder_hidden_states=ctx, pooled_projections=pooled, timestep=t, block_controlnet_hidden_states=[control]
        ).sample
        bf16 = model.to(torch.bfloat16)
        b = lambda v: v.to(torch.bfloat16)
        bf16_sample = bf16(hidden_states=b(x), encoder_hidden_states=b(ctx), pooled_projections=b(pooled), timestep=t).sample.float()
    io.update({
        f"{name}.hidden_states": x, f"{name}.encoder_hidden_states": ctx, f"{name}.pooled_projections": pooled,
        f"{name}.timestep": t, f"{name}.sample": sample, f"{name}.bf16.sample": bf16_sample,
        f"{name}.skip_layers_0.sample": skipped, f"{name}.controlnet.residual": control, f"{name}.controlnet.sample": controlled,
    })


RELEASED = {
    "sd3-medium": dict(
        sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64, num_attention_heads=24,
        joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=192,
    ),
    "sd3.5-medium": dict(
        sample_size=128, patch_size=2, in_channels=16, num_layers=24, attention_head_dim=64, num_attention_heads=24,
        joint_attention_dim=4096, caption_projection_dim=1536, pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=384,
        qk_norm="rms_norm", dual_attention_layers=list(range(13)),
    ),
    "sd3.5-large": dict(
        sample_size=128, patch_size=2, in_channels=16, num_layers=38, attention_head_dim=64, num_attention_heads=38,
        joint_attention_dim=4096, caption_projection_dim=2432, pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=192,
        qk_norm="rms_norm",
    ),
}


def state_dict_shapes():
    shapes = {}
    for name, kwargs in RELEASED.items():
        with torch.device("meta"):
            model = SD3Transformer2DModel(**kwargs)
        shapes[name] = {"config": kwargs, "keys": {k: list(v.shape) for k, v in model.state_dict().items()}}
    (out / "sd3_state_dict_shapes.json").write_text(json.dumps(shapes, separators=(",", ":")))


def main():
    state_dict_shapes()
    io = {}
    for i, (name, kwargs) in enumerate(CASES.items()):
        run(name, kwargs, 10 + i, io)
    save_file({k: v.contiguous() for k, v in io.items()}, str(out / "sd3_io.safetensors"))
    for f in sorted(out.rglob("*")):
        if f.is_file() and ("sd3" in str(f.relative_to(out))):
            print(f.relative_to(root), f.stat().st_size)


if __name__ == "__main__":
    main()
