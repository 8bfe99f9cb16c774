"""diffusers references for @dtorch/hf's fromSingleFile: tiny checkpoints in the original layouts.

Run from the repository root with the setup's Python and diffusers' sources:
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_single_file_fixtures.py
Builds three tiny diffusers models with seeded random weights (diffusers' initialisation, then norm
weights and biases perturbed so that a wrong one shows), writes each state dict in the layout of
the original single-file checkpoints (the reverse of diffusers' conversion, written below), checks
that diffusers reads each file back to the same weights (from_single_file with config= a folder
holding the model's config.json; for Flux with its conversion's hard-coded FLUX.1 width,
inner_dim = 3072, replaced by the tiny model's) and that the model it builds gives the same
output, and saves tests/fixtures/hf/single_file/:
  tiny-flux.safetensors   tiny-flux's transformer (packages/hf/assets/tiny-pipelines/tiny-flux.json)
                          in BFL's layout (flux1-dev.safetensors: "double_blocks.0.img_attn.qkv.weight",
                          "single_blocks.0.linear1.weight", final_layer.adaLN_modulation.1 as (shift,
                          scale)), no prefix
  tiny-sd3.safetensors    tiny-sd3's transformer (tiny-sd3.json) in SD3's original layout, with the
                          "model.diffusion_model." prefix (sd3_medium.safetensors)
  tiny-sd35.safetensors   an SD3.5-style MMDiT (qk_norm "rms_norm", dual_attention_layers [0]: SD3.5's
                          ln_q / ln_k and attn2 keys), no prefix
  configs.json            name -> the diffusers config the model was built with (model.config, "_"
                          keys left out): what fromSingleFile must infer
  io.safetensors          for each name, the inputs and diffusers' output (float32):
                          tiny-flux: "<name>.hidden_states" [2, 16, 64] (a 4x4 grid of packed tokens),
                          ".encoder_hidden_states" [2, 8, 32], ".pooled_projections" [2, 32],
                          ".timestep" [2] (in [0, 1]), ".guidance" [2], ".img_ids" [16, 3], ".txt_ids"
                          [8, 3]; tiny-sd3 / tiny-sd35: ".hidden_states" [2, C, 8, 12],
                          ".encoder_hidden_states" [2, 5, joint], ".pooled_projections" [2, pooled],
                          ".timestep" [2] (in [0, 1000]); each with ".sample", the model's output
"""
import inspect
import json
import pathlib
import shutil
import tempfile

import torch
from safetensors.torch import load_file, save_file
from diffusers import FluxTransformer2DModel, SD3Transformer2DModel
from diffusers.loaders import single_file_model, single_file_utils
from fixture_weights import perturb

root = pathlib.Path(__file__).resolve().parents[2]
assets = root / "packages" / "hf" / "assets" / "tiny-pipelines"
out = root / "tests" / "fixtures" / "hf" / "single_file"
PREFIX = "model.diffusion_model."


def tiny_config(name):
    config = json.loads((assets / f"{name}.json").read_text())["transformer"]
    return {k: v for k, v in config.items() if not k.startswith("_")}


def swap_halves(weight):
    """BFL's and SD3's final adaLN emit (shift, scale), diffusers' (scale, shift): the swap is its own inverse."""
    first, second = weight.chunk(2, dim=0)
    return torch.cat([second, first], dim=0)


def take(sd, used, key):
    used.add(key)
    return sd[key]


def fused(sd, used, keys, suffix):
    return torch.cat([take(sd, used, k + suffix) for k in keys], dim=0)


# ---- Flux: diffusers -> BFL (the reverse of convert_flux_transformer_checkpoint_to_diffusers) ----

def flux_to_bfl(sd, num_layers, num_single_layers):
    bfl, used = {}, set()

    def linear(dst, src):
        for s in ("weight", "bias"):
            bfl[f"{dst}.{s}"] = take(sd, used, f"{src}.{s}")

    linear("time_in.in_layer", "time_text_embed.timestep_embedder.linear_1")
    linear("time_in.out_layer", "time_text_embed.timestep_embedder.linear_2")
    linear("vector_in.in_layer", "time_text_embed.text_embedder.linear_1")
    linear("vector_in.out_layer", "time_text_embed.text_embedder.linear_2")
    if "time_text_embed.guidance_embedder.linear_1.weight" in sd:
        linear("guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_1")
        linear("guidance_in.out_layer", "time_text_embed.guidance_embedder.linear_2")
    linear("txt_in", "context_embedder")
    linear("img_in", "x_embedder")
    for i in range(num_layers):
        d, b = f"double_blocks.{i}.", f"transformer_blocks.{i}."
        linear(d + "img_mod.lin", b + "norm1.linear")
        linear(d + "txt_mod.lin", b + "norm1_context.linear")
        for s in ("weight", "bias"):
            bfl[f"{d}img_attn.qkv.{s}"] = fused(sd, used, [b + "attn.to_q", b + "attn.to_k", b + "attn.to_v"], f".{s}")
            bfl[f"{d}txt_attn.qkv.{s}"] = fused(sd, used, [b + "attn.add_q_proj", b + "attn.add_k_proj", b + "attn.add_v_proj"], f".{s}")
        bfl[d + "img_attn.norm.query_norm.scale"] = take(sd, used, b + "attn.norm_q.weight")
        bfl[d + "img_attn.norm.key_norm.scale"] = take(sd, used, b + "attn.norm_k.weight")
        bfl[d + "txt_attn.norm.query_norm.scale"] = take(sd, used, b + "attn.norm_added_q.weight")
        bfl[d + "txt_attn.norm.key_norm.scale"] = take(sd, used, b + "attn.norm_added_k.weight")
        linear(d + "img_mlp.0", b + "ff.net.0.proj")
        linear(d + "img_mlp.2", b + "ff.net.2")
        linear(d + "txt_mlp.0", b + "ff_context.net.0.proj")
        linear(d + "txt_mlp.2", b + "ff_context.net.2")
        linear(d + "img_attn.proj", b + "attn.to_out.0")
        linear(d + "txt_attn.proj", b + "attn.to_add_out")
    for i in range(num_single_layers):
        d, b = f"single_blocks.{i}.", f"single_transformer_blocks.{i}."
        linear(d + "modulation.lin", b + "norm.linear")
        for s in ("weight", "bias"):
            bfl[f"{d}linear1.{s}"] = fused(sd, used, [b + "attn.to_q", b + "attn.to_k", b + "attn.to_v", b + "proj_mlp"], f".{s}")
        bfl[d + "norm.query_norm.scale"] = take(sd, used, b + "attn.norm_q.weight")
        bfl[d + "norm.key_norm.scale"] = take(sd, used, b + "attn.norm_k.weight")
        linear(d + "linear2", b + "proj_out")
    linear("final_layer.linear", "proj_out")
    for s in ("weight", "bias"):
        bfl[f"final_layer.adaLN_modulation.1.{s}"] = swap_halves(take(sd, used, f"norm_out.linear.{s}"))
    assert used == set(sd), f"keys not written: {sorted(set(sd) - used)}"
    return bfl


def flux_conversion(inner_dim):
    """diffusers' convert_flux_transformer_checkpoint_to_diffusers, its FLUX.1 width replaced by `inner_dim`."""
    source = inspect.getsource(single_file_utils.convert_flux_transformer_checkpoint_to_diffusers)
    assert source.count("inner_dim = 3072") == 1
    namespace = dict(vars(single_file_utils))
    exec(source.replace("inner_dim = 3072", f"inner_dim = {inner_dim}"), namespace)
    return namespace["convert_flux_transformer_checkpoint_to_diffusers"]


# ---- SD3: diffusers -> original MMDiT (the reverse of convert_sd3_transformer_checkpoint_to_diffusers) ----

def sd3_to_original(sd, num_layers, dual_attention_layers, qk_norm):
    o, used = {}, set()

    def linear(dst, src):
        for s in ("weight", "bias"):
            o[f"{dst}.{s}"] = take(sd, used, f"{src}.{s}")

    o["pos_embed"] = take(sd, used, "pos_embed.pos_embed")
    linear("x_embedder.proj", "pos_embed.proj")
    linear("t_embedder.mlp.0", "time_text_embed.timestep_embedder.linear_1")
    linear("t_embedder.mlp.2", "time_text_embed.timestep_embedder.linear_2")
    linear("context_embedder", "context_embedder")
    linear("y_embedder.mlp.0", "time_text_embed.text_embedder.linear_1")
    linear("y_embedder.mlp.2", "time_text_embed.text_embedder.linear_2")
    for i in range(num_layers):
        x, c, b = f"joint_blocks.{i}.x_block.", f"joint_blocks.{i}.context_block.", f"transformer_blocks.{i}."
        last = i == num_layers - 1
        for s in ("weight", "bias"):
            o[f"{x}attn.qkv.{s}"] = fused(sd, used, [b + "attn.to_q", b + "attn.to_k", b + "attn.to_v"], f".{s}")
            o[f"{c}attn.qkv.{s}"] = fused(sd, used, [b + "attn.add_q_proj", b + "attn.add_k_proj", b + "attn.add_v_proj"], f".{s}")
        if qk_norm:
            o[x + "attn.ln_q.weight"] = take(sd, used, b + "attn.norm_q.weight")
            o[x + "attn.ln_k.weight"] = take(sd, used, b + "attn.norm_k.weight")
            o[c + "attn.ln_q.weight"] = take(sd, used, b + "attn.norm_added_q.weight")
            o[c + "attn.ln_k.weight"] = take(sd, used, b + "attn.norm_added_k.weight")
        linear(x + "attn.proj", b + "attn.to_out.0")
        if not last:
            linear(c + "attn.proj", b + "attn.to_add_out")
        if i in dual_attention_layers:
            for s in ("weight", "bias"):
                o[f"{x}attn2.qkv.{s}"] = fused(sd, used, [b + "attn2.to_q", b + "attn2.to_k", b + "attn2.to_v"], f".{s}")
            if qk_norm:
                o[x + "attn2.ln_q.weight"] = take(sd, used, b + "attn2.norm_q.weight")
                o[x + "attn2.ln_k.weight"] = take(sd, used, b + "attn2.norm_k.weight")
            linear(x + "attn2.proj", b + "attn2.to_out.0")
        linear(x + "adaLN_modulation.1", b + "norm1.linear")
        if last:
            for s in ("weight", "bias"):
                o[f"{c}adaLN_modulation.1.{s}"] = swap_halves(take(sd, used, f"{b}norm1_context.linear.{s}"))
        else:
            linear(c + "adaLN_modulation.1", b + "norm1_context.linear")
        linear(x + "mlp.fc1", b + "ff.net.0.proj")
        linear(x + "mlp.fc2", b + "ff.net.2")
        if not last:
            linear(c + "mlp.fc1", b + "ff_context.net.0.proj")
            linear(c + "mlp.fc2", b + "ff_context.net.2")
    linear("final_layer.linear", "proj_out")
    for s in ("weight", "bias"):
        o[f"final_layer.adaLN_modulation.1.{s}"] = swap_halves(take(sd, used, f"norm_out.linear.{s}"))
    assert used == set(sd), f"keys not written: {sorted(set(sd) - used)}"
    return o


# ---- the cases ----

def flux_inputs(config, seed):
    g = torch.Generator().manual_seed(seed)
    side, txt = 4, 8
    img_ids = torch.zeros(side, side, 3)
    img_ids[..., 1] = torch.arange(side)[:, None]
    img_ids[..., 2] = torch.arange(side)[None, :]
    return dict(
        hidden_states=torch.randn(2, side * side, config["in_channels"], generator=g),
        encoder_hidden_states=torch.randn(2, txt, config["joint_attention_dim"], generator=g),
        pooled_projections=torch.randn(2, config["pooled_projection_dim"], generator=g),
        timestep=torch.tensor([0.7, 0.25]),
        guidance=torch.tensor([3.5, 5.0]),
        img_ids=img_ids.reshape(side * side, 3),
        txt_ids=torch.randint(0, 7, (txt, 3), generator=g).float(),
    )


def sd3_inputs(config, seed):
    g = torch.Generator().manual_seed(seed)
    return dict(
        hidden_states=torch.randn(2, config["in_channels"], 8, 12, generator=g),
        encoder_hidden_states=torch.randn(2, 5, config["joint_attention_dim"], generator=g),
        pooled_projections=torch.randn(2, config["pooled_projection_dim"], generator=g),
        timestep=torch.tensor([981.0, 37.5]),
    )


TINY_SD35 = dict(
    sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=4, num_attention_heads=2,
    joint_attention_dim=8, caption_projection_dim=8, pooled_projection_dim=8, out_channels=4, pos_embed_max_size=8,
    qk_norm="rms_norm", dual_attention_layers=(0,),
)

CASES = {
    # name: (class, config, seed, prefix)
    "tiny-flux": (FluxTransformer2DModel, tiny_config("tiny-flux"), 31, ""),
    "tiny-sd3": (SD3Transformer2DModel, tiny_config("tiny-sd3"), 32, PREFIX),
    "tiny-sd35": (SD3Transformer2DModel, TINY_SD35, 33, ""),
}


def run(name, cls, config, seed, prefix, io, configs):
    torch.manual_seed(seed)
    model = cls(**config).eval()
    perturb(model, seed)
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    c = model.config
    is_flux = cls is FluxTransformer2DModel
    if is_flux:
        original = flux_to_bfl(sd, c.num_layers, c.num_single_layers)
    else:
        original = sd3_to_original(sd, c.num_layers, tuple(c.dual_attention_layers), c.qk_norm)
    path = out / f"{name}.safetensors"
    save_file({prefix + k: v.contiguous() for k, v in original.items()}, str(path))

    # diffusers' own conversion gives the same weights back, key for key
    convert = flux_conversion(c.num_attention_heads * c.attention_head_dim) if is_flux else single_file_utils.convert_sd3_transformer_checkpoint_to_diffusers
    back = convert(load_file(str(path)))
    assert set(back) == set(sd), sorted(set(back) ^ set(sd))
    for k, v in sd.items():
        assert torch.equal(back[k], v), k

    # and from_single_file (config= a folder with the config) builds a model with the same output
    inputs = flux_inputs(config, seed + 100) if is_flux else sd3_inputs(config, seed + 100)
    with torch.no_grad():
        sample = model(**inputs).sample
    with tempfile.TemporaryDirectory() as folder:
        model.save_config(folder)
        mapping = single_file_model.SINGLE_FILE_LOADABLE_CLASSES[cls.__name__]
        saved = mapping["checkpoint_mapping_fn"]
        mapping["checkpoint_mapping_fn"] = convert
        try:
            loaded = cls.from_single_file(str(path), config=folder, local_files_only=True).eval()
        finally:
            mapping["checkpoint_mapping_fn"] = saved
    with torch.no_grad():
        again = loaded(**inputs).sample
    assert torch.equal(again, sample), (again - sample).abs().max()

    for k, v in inputs.items():
        io[f"{name}.{k}"] = v
    io[f"{name}.sample"] = sample
    configs[name] = {k: list(v) if isinstance(v, tuple) else v for k, v in c.items() if not k.startswith("_")}


def main():
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    io, configs = {}, {}
    for name, (cls, config, seed, prefix) in CASES.items():
        run(name, cls, config, seed, prefix, io, configs)
    save_file({k: v.contiguous() for k, v in io.items()}, str(out / "io.safetensors"))
    (out / "configs.json").write_text(json.dumps(configs, indent=1, sort_keys=True) + "\n")
    total = 0
    for f in sorted(out.iterdir()):
        total += f.stat().st_size
        print(f.relative_to(root), f.stat().st_size)
    print("total", total)
    assert total < 1_000_000


if __name__ == "__main__":
    main()
