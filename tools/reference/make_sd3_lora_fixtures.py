"""The tiny-sd3 "style" LoRA rewritten in kohya's (sd-scripts') SD3 layout, for @dtorch/hf's sd3LoraToDiffusers.

Run from the repository root after make_lora_fixtures.py (it reads that script's sd3-style.safetensors):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_sd3_lora_fixtures.py

diffusers has no converter for this layout: SD3LoraLoaderMixin.lora_state_dict returns the kohya keys as they
are and load_lora_weights then finds no "transformer." / "text_encoder." key, warns and loads nothing (checked
below, so that this script says so if diffusers ever learns the layout). The reference for where each original
module goes is therefore diffusers' single-file converter, convert_sd3_transformer_checkpoint_to_diffusers (the
mapping of SD3's original MMDiT names, which sd-scripts' LoRA names are built from), and sd-scripts' own
networks/lora_sd3.py for the names and the merged q/k/v form:
  - names: "lora_unet_" + the MMDiT module with "." -> "_" ("lora_unet_joint_blocks_0_x_block_attn_qkv"),
    "lora_te1_" / "lora_te2_" + the CLIPTextModelWithProjection module with "." -> "_"
    ("lora_te1_text_model_encoder_layers_0_self_attn_q_proj"); ".lora_down.weight" (A), ".lora_up.weight" (B),
    ".alpha" (float32 scalar); a module runs alpha / rank * up @ down
  - the fused qkv of a joint block: the source adapter's lora_A of to_q / to_k / to_v are not equal (checked),
    so the file holds what sd-scripts' split_qkv saves: down = the three A's stacked [3r, in], up = the three
    B's block-diagonal [3 out, 3r], alpha = 3 * the source's alpha (so alpha / rank is the source's scale)
  - final_layer.adaLN_modulation.1 (norm_out.linear) and the last block's context_block.adaLN_modulation.1
    (norm1_context.linear): the original's (shift, scale) rows, diffusers' (scale, shift): B's halves swapped

Checks: (1) the file's deltas, added to the tiny transformer's weights in the original layout and converted by
convert_sd3_transformer_checkpoint_to_diffusers, change each diffusers linear by the source adapter's scale * B @ A
(float64, relative error < 1e-12) and nothing else; (2) the same merged weights (and the CLIPs' merged deltas) run
the sd3.style call of cases.json to within 1e-4 of references.safetensors' "sd3.style": every module of the source
adapter is expressible, so that reference applies to the kohya file, and no new reference is written.

Writes tests/fixtures/hf/lora/sd3-style-kohya.safetensors (canonical header, deterministic: no random numbers).
"""
import logging

import torch
from diffusers import StableDiffusion3Pipeline
from diffusers.loaders.single_file_utils import convert_sd3_transformer_checkpoint_to_diffusers
from peft.tuners.tuners_utils import BaseTunerLayer
from safetensors.torch import load_file, save_file

from make_lora_fixtures import CASES, canonical_header, delta, fresh, loaded_records, out, warnings_seen

KOHYA_FILE = "sd3-style-kohya.safetensors"
QKV = {"x_block.attn.qkv": ["attn.to_q", "attn.to_k", "attn.to_v"],
       "context_block.attn.qkv": ["attn.add_q_proj", "attn.add_k_proj", "attn.add_v_proj"]}
DUAL_QKV = {"x_block.attn2.qkv": ["attn2.to_q", "attn2.to_k", "attn2.to_v"]}


def original_names(config):
    """diffusers linear -> (original MMDiT module, swapped halves), and original fused qkv -> its diffusers linears,
    as convert_sd3_transformer_checkpoint_to_diffusers maps them, for a transformer of `config`."""
    single = {
        "pos_embed.proj": ("x_embedder.proj", False),
        "time_text_embed.timestep_embedder.linear_1": ("t_embedder.mlp.0", False),
        "time_text_embed.timestep_embedder.linear_2": ("t_embedder.mlp.2", False),
        "context_embedder": ("context_embedder", False),
        "time_text_embed.text_embedder.linear_1": ("y_embedder.mlp.0", False),
        "time_text_embed.text_embedder.linear_2": ("y_embedder.mlp.2", False),
        "proj_out": ("final_layer.linear", False),
        "norm_out.linear": ("final_layer.adaLN_modulation.1", True),
    }
    fused = {}
    for i in range(config.num_layers):
        to, frm, last = f"transformer_blocks.{i}.", f"joint_blocks.{i}.", i == config.num_layers - 1
        block = {"attn.to_out.0": "x_block.attn.proj", "norm1.linear": "x_block.adaLN_modulation.1",
                 "ff.net.0.proj": "x_block.mlp.fc1", "ff.net.2": "x_block.mlp.fc2"}
        if not last:
            block.update({"attn.to_add_out": "context_block.attn.proj", "ff_context.net.0.proj": "context_block.mlp.fc1",
                          "ff_context.net.2": "context_block.mlp.fc2"})
        qkv = dict(QKV)
        if i in config.dual_attention_layers:
            block["attn2.to_out.0"] = "x_block.attn2.proj"
            qkv.update(DUAL_QKV)
        single.update({to + k: (frm + v, False) for k, v in block.items()})
        # the last block's text stream only feeds attention: diffusers' AdaLayerNormContinuous, (scale, shift)
        single[to + "norm1_context.linear"] = (frm + "context_block.adaLN_modulation.1", last)
        fused.update({frm + k: [to + m for m in v] for k, v in qkv.items()})
    return single, fused


def swap_halves(t):
    first, second = t.chunk(2, dim=0)
    return torch.cat([second, first])


def to_original(state, config):
    """The diffusers transformer's state dict in the original MMDiT layout (the inverse of diffusers' converter)."""
    single, fused = original_names(config)
    orig = {"pos_embed": state["pos_embed.pos_embed"]}
    for m, (o, swapped) in single.items():
        for p in ("weight", "bias"):
            orig[f"{o}.{p}"] = swap_halves(state[f"{m}.{p}"]) if swapped else state[f"{m}.{p}"]
    for o, ms in fused.items():
        for p in ("weight", "bias"):
            orig[f"{o}.{p}"] = torch.cat([state[f"{m}.{p}"] for m in ms])
    assert len(orig) + sum(len(ms) - 1 for ms in fused.values()) * 2 == len(state), "a key of the model is not mapped"
    return orig


def kohya_name(module):
    """sd-scripts' LoRA name of an original MMDiT module or of a CLIP module ("text_encoder.<path>")."""
    for component, prefix in (("text_encoder_2.", "lora_te2_"), ("text_encoder.", "lora_te1_")):
        if module.startswith(component):
            return prefix + module.removeprefix(component).replace(".", "_")
    return "lora_unet_" + module.replace(".", "_")


def to_kohya(source, config):
    """The source adapter in sd-scripts' layout: {key: tensor}, and {kohya name: [diffusers modules]}."""
    single, fused = original_names(config)
    sd, covers = {}, {}

    def put(name, down, up, alpha):
        sd[f"{name}.lora_down.weight"] = down.contiguous()
        sd[f"{name}.lora_up.weight"] = up.contiguous()
        sd[f"{name}.alpha"] = torch.tensor(float(alpha))

    for m, (o, swapped) in single.items():
        rec = source.get("transformer." + m)
        if rec is not None:
            put(kohya_name(o), rec["A"], swap_halves(rec["B"]) if swapped else rec["B"], rec["alpha"])
            covers[kohya_name(o)] = ["transformer." + m]
    for o, ms in fused.items():
        recs = [source["transformer." + m] for m in ms if "transformer." + m in source]
        if not recs:
            continue
        assert len(recs) == len(ms), f"{o}: the adapter covers only part of the fused matrix"
        assert len({(r["rank"], r["alpha"]) for r in recs}) == 1, f"{o}: parts of different rank or alpha"
        assert not all(torch.equal(r["A"], recs[0]["A"]) for r in recs), f"{o}: tied A's, write the shared form"
        # sd-scripts' split_qkv: A's stacked, B's block-diagonal; alpha / rank as each part's
        put(kohya_name(o), torch.cat([r["A"] for r in recs]), torch.block_diag(*[r["B"] for r in recs]), len(recs) * recs[0]["alpha"])
        covers[kohya_name(o)] = ["transformer." + m for m in ms]
    for m, rec in source.items():
        if m.startswith("text_encoder"):
            put(kohya_name(m), rec["A"], rec["B"], rec["alpha"])
            covers[kohya_name(m)] = [m]
    assert sorted(m for ms in covers.values() for m in ms) == sorted(source), "a module of the source is not written"
    return sd, covers


def kohya_delta(sd, name):
    down, up = sd[f"{name}.lora_down.weight"].double(), sd[f"{name}.lora_up.weight"].double()
    return sd[f"{name}.alpha"].item() / down.shape[0] * (up @ down)


def convert(orig):
    return convert_sd3_transformer_checkpoint_to_diffusers({k: v.clone() for k, v in orig.items()})


@torch.no_grad()
def check_single_file(pipe, sd, source):
    """(1): the kohya deltas in the original layout, through diffusers' single-file converter. Returns the merged
    diffusers transformer state dict (float32)."""
    config = pipe.transformer.config
    base = {k: v.double() for k, v in pipe.transformer.state_dict().items()}
    orig = to_original(base, config)
    back = convert(orig)
    assert back.keys() == base.keys() and all(torch.equal(back[k], base[k]) for k in base), "to_original is not the inverse"
    names = {o for o in orig if o.endswith(".weight")}
    for key in sd:
        if key.startswith("lora_unet_") and key.endswith(".lora_down.weight"):
            name = key.removesuffix(".lora_down.weight")
            module = next(o for o in names if kohya_name(o.removesuffix(".weight")) == name)
            orig[module] = orig[module] + kohya_delta(sd, name)
    merged = convert(orig)
    worst = 0.0
    for k in base:
        change = merged[k] - base[k]
        module = "transformer." + k.removesuffix(".weight")
        if k.endswith(".weight") and module in source:
            want = delta(source[module])
            err = ((change - want).abs().max() / want.abs().max()).item()
            worst = max(worst, err)
            assert err < 1e-12, f"{k}: the kohya file's delta differs from the source's by {err}"
        else:
            assert not change.any(), f"{k} changed"
    print(f"single-file check: {len([m for m in source if m.startswith('transformer.')])} transformer modules, "
          f"worst relative error {worst:.2e}; no other weight changed")
    return {k: v.float() for k, v in merged.items()}


@torch.no_grad()
def check_end_to_end(sd, merged, covers):
    """(2): the sd3.style call on a pipeline whose weights have the kohya file merged, against "sd3.style"."""
    spec = CASES["sd3.style"]
    pipe = fresh(spec["pipeline"])
    pipe.transformer.load_state_dict(merged)
    for name, modules in covers.items():
        if name.startswith("lora_te"):
            component, path = modules[0].split(".", 1)
            linear = getattr(pipe, component).get_submodule(path)
            linear.weight += kohya_delta(sd, name).float()
    got = pipe(**spec["args"], generator=torch.Generator("cpu").manual_seed(spec["seed"])).images.float()
    want = load_file(out / "references.safetensors")["sd3.style"]
    rel = ((got - want).abs().max() / want.abs().max()).item()
    print(f"sd3.style with the kohya file merged (diffusers' single-file conversion): max |diff| / max |ref| = {rel:.2e}")
    assert rel < 1e-4, "the merged kohya file does not reproduce sd3.style"


def check_diffusers_ignores(path):
    """diffusers' own SD3 loader: lora_state_dict leaves the keys as they are, load_lora_weights loads nothing."""
    sd = StableDiffusion3Pipeline.lora_state_dict(str(path))
    assert sorted(sd) == sorted(load_file(path)), "diffusers now converts kohya SD3 LoRAs: use its conversion as the reference"
    pipe = fresh("tiny-sd3")
    before = len(warnings_seen)
    pipe.load_lora_weights(str(path), adapter_name="x")
    layers = sum(isinstance(m, BaseTunerLayer) for c in (pipe.transformer, pipe.text_encoder, pipe.text_encoder_2) for m in c.modules())
    assert layers == 0, f"diffusers now loads {layers} LoRA layers from a kohya SD3 file"
    print(f"diffusers' load_lora_weights of {path.name}: 0 LoRA layers; warnings: {len(warnings_seen) - before}")


def main():
    logging.getLogger("diffusers").setLevel(logging.WARNING)
    pipe = fresh("tiny-sd3")
    base = {k: v.clone() for k, v in pipe.transformer.state_dict().items()}
    pipe.load_lora_weights(str(out / "sd3-style.safetensors"), adapter_name="style")
    source = loaded_records(pipe, "style")
    pipe.unload_lora_weights()
    assert all(torch.equal(v, pipe.transformer.state_dict()[k]) for k, v in base.items())
    sd, covers = to_kohya(source, pipe.transformer.config)
    path = out / KOHYA_FILE
    save_file(sd, path)
    canonical_header(path)
    assert load_file(path).keys() == sd.keys()
    print(f"{KOHYA_FILE}: {len(sd)} tensors, {len(covers)} kohya modules for the source's {len(source)}, {path.stat().st_size} bytes")
    merged = check_single_file(pipe, sd, source)
    check_end_to_end(sd, merged, covers)
    check_diffusers_ignores(path)


if __name__ == "__main__":
    main()
