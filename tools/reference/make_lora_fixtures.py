"""diffusers references for @dtorch/hf's LoRA adapters (diffusers' load_lora_weights) on tiny-flux and tiny-sd3.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_lora_fixtures.py
Builds the tiny pipelines with make_flux_pipeline_fixtures.build() and make_sd3_pipeline_fixtures.build(),
injects PEFT LoRAs (LoraConfig, random lora_A and lora_B from seeded generators: A ~ randn / sqrt(fan_in),
B ~ 0.3 * randn / sqrt(rank)), writes them as adapter files, loads every file into a fresh pipeline with
diffusers' own loader (pipe.load_lora_weights; the T5 adapter, which diffusers' Flux loader does not load,
with peft's inject_adapter_in_model + set_peft_model_state_dict) and runs the cases below on the CPU in
float32. Deterministic: running it twice writes identical files (each .safetensors header is rewritten in a
fixed order, see canonical_header). Writes tests/fixtures/hf/lora/:
  flux-style.safetensors         adapter "style", diffusers layout, from FluxPipeline.save_lora_weights:
                                 "transformer.<module>.lora_A.weight" [r, in], ".lora_B.weight" [out, r] for
                                 every nn.Linear of FluxTransformer2DModel (r 4, alpha 8, rank_pattern and
                                 alpha_pattern below), "text_encoder.<module>.lora_A/B.weight" for CLIP's
                                 q_proj/k_proj/v_proj/out_proj/fc1/fc2 (r 4, alpha 4; transformers 5's
                                 CLIPTextModel names them without "text_model."); header metadata
                                 {"format": "pt", "lora_adapter_metadata": JSON of {"transformer.<LoraConfig
                                 field>": ..., "text_encoder.<field>": ...}} (LoraConfig.to_dict(), sets as
                                 sorted lists). The lora_A of fused layers are equal (double blocks: to_q =
                                 to_k = to_v, add_q_proj = add_k_proj = add_v_proj; single blocks: to_q =
                                 to_k = to_v = proj_mlp) and share one rank and alpha, so the adapter can be
                                 written in fused-qkv layouts
  flux-detail.safetensors        adapter "detail": double blocks' attn to_q/to_k/to_v/to_out.0 only, authored
                                 with r 8, alpha 4, saved WITHOUT metadata (diffusers infers alpha = rank)
  flux-style-kohya.safetensors   "style" in sd-scripts' layout: "lora_unet_<bfl module, "." -> "_">.lora_down
                                 .weight" (= A), ".lora_up.weight" (= B; fused qkv: the shared A and the cat
                                 of the B's), ".alpha" (float32 scalar: the source's alpha, so that diffusers'
                                 conversion, which folds alpha / rank into the weights, gives the same scale *
                                 B @ A; final_layer's alphas diffusers ignores: there alpha = rank and the up
                                 weight carries the scale), text encoder as "lora_te1_encoder_layers_<i>_self_
                                 attn_q_proj..." (without the "text_model_" of real files: with transformers 5
                                 diffusers fails on those, see the note at to_kohya); single blocks' linear1
                                 left out (KOHYA_NOTE)
  flux-style-bfl.safetensors     "style" in BFL's module names with the "diffusion_model." prefix
                                 ("diffusion_model.double_blocks.0.img_attn.qkv.lora_down.weight", ".alpha", ...;
                                 final_layer.adaLN_modulation.1 with BFL's (shift, scale) halves; CLIP as
                                 "text_encoders.clip_l.transformer.encoder.layers...."): the only BFL-named form
                                 diffusers' Flux loader converts (its ComfyUI branch, which maps
                                 "diffusion_model." to "lora_unet_" and then converts as sd-scripts)
  flux-xlabs.safetensors         adapter "xlabs" = "style" restricted to what XLabs LoRAs hold, in XLabs'
                                 layout: "double_blocks.<i>.processor.{qkv_lora1,proj_lora1,qkv_lora2,
                                 proj_lora2}.{down,up}.weight", no alphas (the up weights carry scale)
  flux-style-kohya.diffusers.safetensors, flux-style-bfl.diffusers.safetensors,
  flux-xlabs.diffusers.safetensors
                                 what FluxPipeline.lora_state_dict(file) returns for each converted file, key
                                 for key (diffusers' keys, float32): what a converter must reproduce
  flux-t5.safetensors            a PEFT LoRA on tiny-flux's T5 (q, k, v, o, wi_0, wi_1, wo; r 4, alpha 8) in
                                 the diffusers key layout "text_encoder_2.encoder.block.<i>.layer.0.SelfAttention
                                 .q.lora_A.weight" with metadata "text_encoder_2.<field>"
  sd3-style.safetensors          adapter "style" for tiny-sd3: every nn.Linear of SD3Transformer2DModel (r 4,
                                 alpha 8, patterns below), CLIP LoRAs on text_encoder (r 4, alpha 4) and
                                 text_encoder_2 (r 2, alpha 4), both named "text_model.encoder..." (CLIP
                                 with projection keeps "text_model."), with metadata
  references.safetensors         float32, one tensor per case, keyed by the case's name (see CASES): the
                                 final latents of output_type="latent" ([B, 4, 64] packed for Flux, [B, 16,
                                 16, 16] for SD3), or an encode_prompt output ("flux.*.pooled" [1, 32],
                                 "flux.*.prompt_embeds" [1, 8, 32]); "*_base" cases are the same calls
                                 without an adapter
  cases.json                     name -> the case: pipeline, call ("__call__" or "encode_prompt"), output
                                 (for encode_prompt: which one), args (the call's arguments, output_type
                                 included), seed (of torch.Generator("cpu").manual_seed), adapters loaded in
                                 order ([{file, adapter_name, loader: "diffusers" | "peft"}]), set_adapters
                                 ({adapter_names, adapter_weights} or null), scale (joint_attention_kwargs
                                 {"scale"} or null), differs_from / equals (the cases it is checked against)
  modules.json                   file -> {"adapter_name", "loaded": [{module, rank, alpha, scale}] with module
                                 the diffusers module path ("transformer."/"text_encoder."/"text_encoder_2."
                                 prefixed) of every LoRA layer that loading the file alone creates, rank,
                                 alpha and scale read back from the PEFT layer (r, lora_alpha, scaling),
                                 "not_loaded": {module: why} for modules of the source adapter that the file
                                 does not bring in}
"""
import json
import logging
import math
import pathlib
import tempfile

import torch
from diffusers import FluxPipeline, StableDiffusion3Pipeline
from diffusers.loaders.lora_base import LORA_ADAPTER_METADATA_KEY
from diffusers.loaders.lora_conversion_utils import swap_scale_shift
from diffusers.utils.state_dict_utils import convert_state_dict_to_diffusers, convert_state_dict_to_peft
from peft import LoraConfig, get_peft_model_state_dict, inject_adapter_in_model, set_peft_model_state_dict
from peft.tuners.tuners_utils import BaseTunerLayer
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import make_flux_pipeline_fixtures
import make_sd3_pipeline_fixtures
from tiny_pipeline_assets import tiny_spec

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "lora"

# every nn.Linear of tiny-flux's FluxTransformer2DModel (1 double block, 2 single blocks)
FLUX_DOUBLE = ["attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0", "attn.add_q_proj", "attn.add_k_proj",
               "attn.add_v_proj", "attn.to_add_out", "ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj",
               "ff_context.net.2", "norm1.linear", "norm1_context.linear"]
FLUX_SINGLE = ["attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp", "proj_out", "norm.linear"]
FLUX_TOP = ["x_embedder", "context_embedder", "time_text_embed.timestep_embedder.linear_1",
            "time_text_embed.timestep_embedder.linear_2", "time_text_embed.guidance_embedder.linear_1",
            "time_text_embed.guidance_embedder.linear_2", "time_text_embed.text_embedder.linear_1",
            "time_text_embed.text_embedder.linear_2", "norm_out.linear", "proj_out"]
FLUX_LINEARS = FLUX_TOP + [f"transformer_blocks.0.{m}" for m in FLUX_DOUBLE] + [
    f"single_transformer_blocks.{i}.{m}" for i in range(2) for m in FLUX_SINGLE]
CLIP_TARGETS = ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"]
T5_TARGETS = ["q", "k", "v", "o", "wi_0", "wi_1", "wo"]  # tiny-flux's T5 is gated-gelu: wi_0, wi_1


def pattern(groups):
    """rank_pattern, alpha_pattern from [(module names, r, alpha)] (full names: PEFT matches "(.*\\.)?name$")."""
    return ({m: r for names, r, _ in groups for m in names}, {m: a for names, _, a in groups for m in names})


# "style": r 4, alpha 8 (scale 2) but ff r 2 alpha 2 (scale 1), single blocks' fused q/k/v/mlp r 6 alpha 3
# (scale 0.5), double blocks' add_q/k/v r 3 alpha 6 (scale 2, another rank), x_embedder r 8 alpha 4 (0.5),
# single blocks' proj_out r 5 alpha 20 (scale 4), norm_out.linear r 2 alpha 1 (0.5)
FLUX_STYLE_PATTERNS = pattern([
    ([f"transformer_blocks.0.{m}" for m in ("ff.net.0.proj", "ff.net.2", "ff_context.net.0.proj", "ff_context.net.2")], 2, 2),
    ([f"single_transformer_blocks.{i}.{m}" for i in range(2) for m in ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")], 6, 3),
    ([f"transformer_blocks.0.attn.{m}" for m in ("add_q_proj", "add_k_proj", "add_v_proj")], 3, 6),
    (["x_embedder"], 8, 4),
    ([f"single_transformer_blocks.{i}.proj_out" for i in range(2)], 5, 20),
    (["norm_out.linear"], 2, 1),
])
# lora_A tied within what kohya / BFL / XLabs fuse: [source, *copies]
FLUX_TIED = [["transformer_blocks.0.attn.to_q", "transformer_blocks.0.attn.to_k", "transformer_blocks.0.attn.to_v"],
             ["transformer_blocks.0.attn.add_q_proj", "transformer_blocks.0.attn.add_k_proj", "transformer_blocks.0.attn.add_v_proj"]] + [
    [f"single_transformer_blocks.{i}.{m}" for m in ("attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp")] for i in range(2)]
FLUX_DETAIL_TARGETS = [f"transformer_blocks.0.attn.{m}" for m in ("to_q", "to_k", "to_v", "to_out.0")]

# every nn.Linear of tiny-sd3's SD3Transformer2DModel (2 blocks, the last context_pre_only)
SD3_LINEARS = ["time_text_embed.timestep_embedder.linear_1", "time_text_embed.timestep_embedder.linear_2",
               "time_text_embed.text_embedder.linear_1", "time_text_embed.text_embedder.linear_2", "context_embedder",
               "norm_out.linear", "proj_out"] + [
    f"transformer_blocks.{i}.{m}" for i in range(2) for m in (
        "norm1.linear", "norm1_context.linear", "attn.to_q", "attn.to_k", "attn.to_v", "attn.add_q_proj",
        "attn.add_k_proj", "attn.add_v_proj", "attn.to_out.0", "ff.net.0.proj", "ff.net.2")] + [
    "transformer_blocks.0.attn.to_add_out", "transformer_blocks.0.ff_context.net.0.proj", "transformer_blocks.0.ff_context.net.2"]
SD3_STYLE_PATTERNS = pattern([
    ([f"transformer_blocks.{i}.ff.net.{m}" for i in range(2) for m in ("0.proj", "2")] +
     ["transformer_blocks.0.ff_context.net.0.proj", "transformer_blocks.0.ff_context.net.2"], 2, 2),
    (["context_embedder"], 6, 3),
    ([f"transformer_blocks.1.attn.{m}" for m in ("add_q_proj", "add_k_proj", "add_v_proj")], 3, 6),
])

KOHYA_NOTE = ("diffusers' sd-scripts converter hard-codes FLUX.1's sizes for single_blocks.<i>.linear1 "
              "(split dims 3072, 3072, 3072, 12288), so tiny-flux's fused q/k/v/mlp cannot be written")
PREFIX_NOTE = ("written, and converted by diffusers' lora_state_dict, but under a key without the 'transformer.' "
               "prefix, which load_lora_weights drops")
XLABS_NOTE = "XLabs LoRAs hold only the double blocks' attention (processor.qkv_lora1/2, proj_lora1/2)"

FLUX_ARGS = dict(prompt="a photo of a cat", height=32, width=32, num_inference_steps=2, max_sequence_length=8,
                 output_type="latent")
ENCODE_ARGS = dict(prompt="a photo of a cat", prompt_2=None, max_sequence_length=8)
SD3_ARGS = dict(prompt="a photo of a cat", negative_prompt="blurry", guidance_scale=5.0, height=32, width=32,
                num_inference_steps=2, max_sequence_length=8, output_type="latent")


def adapter(file, name, loader="diffusers"):
    return {"file": file, "adapter_name": name, "loader": loader}


STYLE = adapter("flux-style.safetensors", "style")


def case(pipeline, args, seed=None, adapters=(), call="__call__", output=None, set_adapters=None, scale=None,
         differs_from=(), equals=()):
    return {"pipeline": pipeline, "call": call, "output": output, "args": args, "seed": seed, "adapters": list(adapters),
            "set_adapters": set_adapters, "scale": scale, "differs_from": list(differs_from), "equals": list(equals)}


CASES = {
    "flux.base": case("tiny-flux", FLUX_ARGS, 0),
    "flux.style": case("tiny-flux", FLUX_ARGS, 0, [STYLE], differs_from=["flux.base"]),
    "flux.style_detail": case("tiny-flux", FLUX_ARGS, 0, [STYLE, adapter("flux-detail.safetensors", "detail")],
                              set_adapters={"adapter_names": ["style", "detail"], "adapter_weights": [0.8, 0.5]},
                              differs_from=["flux.base", "flux.style"]),
    # diffusers' per-call LoRA scale: scales the transformer's LoRA layers and, through encode_prompt's
    # lora_scale, the text encoders' ones
    "flux.style_scale": case("tiny-flux", FLUX_ARGS, 0, [STYLE], scale=0.5, differs_from=["flux.base", "flux.style"]),
    "flux.kohya": case("tiny-flux", FLUX_ARGS, 0, [adapter("flux-style-kohya.safetensors", "x")], differs_from=["flux.base"]),
    "flux.bfl": case("tiny-flux", FLUX_ARGS, 0, [adapter("flux-style-bfl.safetensors", "x")], differs_from=["flux.base"]),
    "flux.xlabs": case("tiny-flux", FLUX_ARGS, 0, [adapter("flux-xlabs.safetensors", "x")], differs_from=["flux.base"]),
    "flux.base.pooled": case("tiny-flux", ENCODE_ARGS, call="encode_prompt", output="pooled_prompt_embeds"),
    "flux.base.prompt_embeds": case("tiny-flux", ENCODE_ARGS, call="encode_prompt", output="prompt_embeds"),
    "flux.style.pooled": case("tiny-flux", ENCODE_ARGS, None, [STYLE], "encode_prompt", "pooled_prompt_embeds",
                              differs_from=["flux.base.pooled"]),
    # prompt_embeds come from T5, which "style" leaves alone
    "flux.style.prompt_embeds": case("tiny-flux", ENCODE_ARGS, None, [STYLE], "encode_prompt", "prompt_embeds",
                                     equals=["flux.base.prompt_embeds"]),
    "flux.cfg_base": case("tiny-flux", {**FLUX_ARGS, "negative_prompt": "blurry", "true_cfg_scale": 4.0}, 1),
    "flux.cfg_style": case("tiny-flux", {**FLUX_ARGS, "negative_prompt": "blurry", "true_cfg_scale": 4.0}, 1, [STYLE],
                           differs_from=["flux.cfg_base"]),
    "flux.dp_base": case("tiny-flux", {**FLUX_ARGS, "prompt": ["a photo of a cat", "a red house"]}, 2),
    "flux.dp_style": case("tiny-flux", {**FLUX_ARGS, "prompt": ["a photo of a cat", "a red house"]}, 2, [STYLE],
                          differs_from=["flux.dp_base"]),
    "flux.t5.prompt_embeds": case("tiny-flux", ENCODE_ARGS, None, [adapter("flux-t5.safetensors", "t5", "peft")],
                                  "encode_prompt", "prompt_embeds", differs_from=["flux.base.prompt_embeds"]),
    "sd3.base": case("tiny-sd3", SD3_ARGS, 0),
    "sd3.style": case("tiny-sd3", SD3_ARGS, 0, [adapter("sd3-style.safetensors", "style")], differs_from=["sd3.base"]),
}

# diffusers' warnings while loading, to report
warnings_seen = []


class _Collect(logging.Handler):
    def emit(self, record):
        warnings_seen.append(record.getMessage())


logging.getLogger("diffusers").addHandler(_Collect(level=logging.WARNING))

_tmp = tempfile.TemporaryDirectory()


def fresh(pipeline):
    if pipeline == "tiny-flux":
        pipe, _ = make_flux_pipeline_fixtures.build()
    else:
        pipe, _ = make_sd3_pipeline_fixtures.build(tempfile.mkdtemp(dir=_tmp.name), tiny_spec("tiny-sd3"))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def linear_names(model):
    return sorted(n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and not isinstance(m, BaseTunerLayer))


def lora_layers(model, name):
    return sorted(((n, m) for n, m in model.named_modules() if isinstance(m, BaseTunerLayer) and name in getattr(m, "lora_A", {})),
                  key=lambda nm: nm[0])


@torch.no_grad()
def randomize(model, name, seed):
    """Every LoRA layer of adapter `name`, in sorted module order: k-th A from seed + 2k, B from seed + 2k + 1."""
    for k, (_, m) in enumerate(lora_layers(model, name)):
        a, b = m.lora_A[name].weight, m.lora_B[name].weight
        a.copy_(torch.randn(tuple(a.shape), generator=torch.Generator().manual_seed(seed + 2 * k)) / math.sqrt(a.shape[1]))
        b.copy_(torch.randn(tuple(b.shape), generator=torch.Generator().manual_seed(seed + 2 * k + 1)) * (0.3 / math.sqrt(b.shape[1])))


@torch.no_grad()
def tie(model, name, groups):
    for source, *copies in groups:
        a = model.get_submodule(source).lora_A[name].weight
        for c in copies:
            target = model.get_submodule(c)
            assert target.r[name] == model.get_submodule(source).r[name]
            assert target.lora_alpha[name] == model.get_submodule(source).lora_alpha[name]
            target.lora_A[name].weight.copy_(a)


def read_back(model, name, prefix):
    """{prefix + module: {A, B, rank, alpha, scale}} of adapter `name`, from the PEFT layers."""
    return {f"{prefix}{n}": {"A": m.lora_A[name].weight.detach().clone(), "B": m.lora_B[name].weight.detach().clone(),
                             "rank": m.r[name], "alpha": m.lora_alpha[name], "scale": m.scaling[name]}
            for n, m in lora_layers(model, name)}


def delta(rec):
    return rec["scale"] * (rec["B"].double() @ rec["A"].double())


def metadata_of(config):
    """LoraConfig.to_dict() as diffusers stores it, sets as sorted lists (a set's order is not stable)."""
    return {k: sorted(v) if isinstance(v, set) else v for k, v in config.to_dict().items()}


def add_adapter(model, name, config, seed, tied=()):
    model.add_adapter(config, adapter_name=name)
    randomize(model, name, seed)
    tie(model, name, tied)
    return get_peft_model_state_dict(model, adapter_name=name)


def canonical_header(path):
    """Rewrites a .safetensors header in a fixed order (safetensors writes "__metadata__"'s keys in a hash
    map's order, which changes from run to run): the metadata first, keys sorted, then the tensors by offset."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    ordered = {"__metadata__": dict(sorted(header.pop("__metadata__").items()))} if "__metadata__" in header else {}
    ordered.update(sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]))
    text = json.dumps(ordered, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + raw[8 + n:])


# ---- converters from the diffusers layout (reverse of diffusers' lora_conversion_utils) ----

def flux_bfl_names():
    """diffusers module -> (BFL module, index in the fused group, group size); one block of each kind per index."""
    names = {
        "x_embedder": "img_in", "context_embedder": "txt_in",
        "time_text_embed.timestep_embedder.linear_1": "time_in.in_layer", "time_text_embed.timestep_embedder.linear_2": "time_in.out_layer",
        "time_text_embed.text_embedder.linear_1": "vector_in.in_layer", "time_text_embed.text_embedder.linear_2": "vector_in.out_layer",
        "time_text_embed.guidance_embedder.linear_1": "guidance_in.in_layer", "time_text_embed.guidance_embedder.linear_2": "guidance_in.out_layer",
        "norm_out.linear": "final_layer.adaLN_modulation.1", "proj_out": "final_layer.linear",
    }
    double = {"attn.to_q": "img_attn.qkv", "attn.to_k": "img_attn.qkv", "attn.to_v": "img_attn.qkv", "attn.to_out.0": "img_attn.proj",
              "attn.add_q_proj": "txt_attn.qkv", "attn.add_k_proj": "txt_attn.qkv", "attn.add_v_proj": "txt_attn.qkv",
              "attn.to_add_out": "txt_attn.proj", "ff.net.0.proj": "img_mlp.0", "ff.net.2": "img_mlp.2",
              "ff_context.net.0.proj": "txt_mlp.0", "ff_context.net.2": "txt_mlp.2", "norm1.linear": "img_mod.lin",
              "norm1_context.linear": "txt_mod.lin"}
    single = {"attn.to_q": "linear1", "attn.to_k": "linear1", "attn.to_v": "linear1", "proj_mlp": "linear1",
              "proj_out": "linear2", "norm.linear": "modulation.lin"}
    for i in range(1):
        names.update({f"transformer_blocks.{i}.{k}": f"double_blocks.{i}.{v}" for k, v in double.items()})
    for i in range(2):
        names.update({f"single_transformer_blocks.{i}.{k}": f"single_blocks.{i}.{v}" for k, v in single.items()})
    return names


def fuse(source, modules):
    """The fused layer of `modules` (whose lora_A are tied): (A, cat of the B's, rank, alpha)."""
    recs = [source[m] for m in modules]
    for r in recs[1:]:
        assert torch.equal(r["A"], recs[0]["A"]) and r["rank"] == recs[0]["rank"] and r["alpha"] == recs[0]["alpha"]
    return recs[0]["A"], torch.cat([r["B"] for r in recs]), recs[0]["rank"], recs[0]["alpha"], recs[0]["scale"]


def to_sd_scripts(source, unet_key, te_key):
    """The adapter in sd-scripts' lora_down / lora_up / alpha form; unet_key(bfl module), te_key(CLIP module)."""
    out_sd, skipped = {}, {}
    groups = {}
    for module, bfl in flux_bfl_names().items():
        if "transformer." + module in source:
            groups.setdefault(bfl, []).append("transformer." + module)
    for bfl, modules in groups.items():
        if bfl.endswith("linear1"):
            skipped.update({m: KOHYA_NOTE for m in modules})
            continue
        a, b, rank, alpha, scale = fuse(source, modules)
        if bfl.startswith("final_layer"):
            # diffusers' converter ignores final_layer alphas: the up weight carries the scale (alpha = rank)
            b = b * scale
            alpha = rank
            if bfl == "final_layer.adaLN_modulation.1":
                b = swap_scale_shift(b)  # diffusers swaps BFL's (shift, scale) halves into (scale, shift)
        key = unet_key(bfl)
        out_sd[f"{key}.lora_down.weight"] = a.contiguous()
        out_sd[f"{key}.lora_up.weight"] = b.contiguous()
        out_sd[f"{key}.alpha"] = torch.tensor(float(alpha))
    for module, rec in source.items():
        if module.startswith("text_encoder."):
            key = te_key(module.removeprefix("text_encoder."))
            out_sd[f"{key}.lora_down.weight"] = rec["A"].contiguous()
            out_sd[f"{key}.lora_up.weight"] = rec["B"].contiguous()
            out_sd[f"{key}.alpha"] = torch.tensor(float(rec["alpha"]))
    return out_sd, skipped


# Real sd-scripts files name CLIP "lora_te1_text_model_encoder_...", which diffusers converts to
# "text_model.encoder...": with transformers 5 (whose CLIPTextModel has no "text_model.") its rank inference
# finds no layer and fails (IndexError in get_peft_kwargs); these files use the model's own names.
def to_kohya(source):
    return to_sd_scripts(source, lambda bfl: "lora_unet_" + bfl.replace(".", "_"),
                         lambda m: "lora_te1_" + m.replace(".", "_"))


def to_bfl(source):
    return to_sd_scripts(source, lambda bfl: "diffusion_model." + bfl,
                         lambda m: "text_encoders.clip_l.transformer." + m)


def to_xlabs(source):
    """XLabs' layout of the double blocks' attention; no alphas: the up weights carry the scale."""
    out_sd, skipped = {}, {}
    covered = {}
    for i in range(1):
        blk = f"transformer.transformer_blocks.{i}.attn."
        covered.update({
            f"double_blocks.{i}.processor.qkv_lora1": [blk + m for m in ("to_q", "to_k", "to_v")],
            f"double_blocks.{i}.processor.proj_lora1": [blk + "to_out.0"],
            f"double_blocks.{i}.processor.qkv_lora2": [blk + m for m in ("add_q_proj", "add_k_proj", "add_v_proj")],
            f"double_blocks.{i}.processor.proj_lora2": [blk + "to_add_out"],
        })
    for key, modules in covered.items():
        a, b, _, _, scale = fuse(source, modules)
        out_sd[f"{key}.down.weight"] = a.contiguous()
        out_sd[f"{key}.up.weight"] = (b * scale).contiguous()
    done = {m for ms in covered.values() for m in ms}
    skipped = {m: XLABS_NOTE for m in source if m not in done}
    return out_sd, skipped


# ---- checks ----

def check_state_dict(path, source, skipped):
    """diffusers' lora_state_dict of a converted file: every module's effective delta (alpha / rank as diffusers
    will apply it: no alphas here, so 1) equals the source adapter's; returns it and the modules it names without
    a component prefix."""
    sd, alphas = FluxPipeline.lora_state_dict(str(path), return_alphas=True)
    assert not alphas, f"{path.name}: unexpected alphas {alphas}"
    te = {k.removeprefix("text_encoder."): v for k, v in sd.items() if k.startswith("text_encoder.")}
    if te:
        te = convert_state_dict_to_peft(convert_state_dict_to_diffusers(te))  # as _load_lora_into_text_encoder does
    flat = {**{k: v for k, v in sd.items() if not k.startswith("text_encoder.")},
            **{"text_encoder." + k.removeprefix("text_model."): v for k, v in te.items()}}
    modules = sorted(k.removesuffix(".lora_A.weight") for k in flat if k.endswith(".lora_A.weight"))
    unprefixed = []
    for m in modules:
        name = m if m.startswith(("transformer.", "text_encoder.")) else "transformer." + m
        if name != m:
            unprefixed.append(name)
        got = flat[m + ".lora_B.weight"].double() @ flat[m + ".lora_A.weight"].double()
        err = (got - delta(source[name])).abs().max().item()
        assert err < 1e-6, f"{path.name}: {m} differs from the source by {err}"
    expected = set(source) - set(skipped)
    named = {m if m.startswith(("transformer.", "text_encoder.")) else "transformer." + m for m in modules}
    assert named == expected, f"{path.name}: {sorted(named ^ expected)}"
    return sd, unprefixed


def check_loaded(records, source, skipped, label):
    """A pipeline's loaded layers: each effective delta (scaling * B @ A) equals the source adapter's."""
    for m, rec in records.items():
        err = (delta(rec) - delta(source[m])).abs().max().item()
        assert err < 1e-6, f"{label}: {m} differs from the source by {err}"
    missing = sorted(set(source) - set(records))
    for m in missing:
        assert m in skipped, f"{label}: {m} was not loaded"
    return missing


# ---- running ----

def load(pipe, spec):
    path = out / spec["file"]
    if spec["loader"] == "diffusers":
        pipe.load_lora_weights(str(path), adapter_name=spec["adapter_name"])
        return
    # peft: the "text_encoder_2." part of a diffusers-layout file, injected into text_encoder_2
    sd = load_file(path)
    with safe_open(path, "pt") as f:
        meta = json.loads(f.metadata()[LORA_ADAPTER_METADATA_KEY])
    prefix = "text_encoder_2."
    config = LoraConfig(**{k.removeprefix(prefix): v for k, v in meta.items() if k.startswith(prefix)})
    inject_adapter_in_model(config, pipe.text_encoder_2, adapter_name=spec["adapter_name"])
    result = set_peft_model_state_dict(pipe.text_encoder_2, {k.removeprefix(prefix): v for k, v in sd.items() if k.startswith(prefix)},
                                       adapter_name=spec["adapter_name"])
    assert not [k for k in result.unexpected_keys if "lora" in k], result.unexpected_keys


def components(pipe):
    return [(c, getattr(pipe, c)) for c in ("transformer", "text_encoder", "text_encoder_2") if getattr(pipe, c, None) is not None]


def loaded_records(pipe, name):
    records = {}
    for c, model in components(pipe):
        records.update(read_back(model, name, c + "."))
    return records


@torch.no_grad()
def run(name, spec):
    pipe = fresh(spec["pipeline"])
    for a in spec["adapters"]:
        load(pipe, a)
    if spec["set_adapters"]:
        pipe.set_adapters(spec["set_adapters"]["adapter_names"], spec["set_adapters"]["adapter_weights"])
    args = dict(spec["args"])
    if spec["call"] == "encode_prompt":
        prompt_embeds, pooled, _ = pipe.encode_prompt(**args)
        return {"prompt_embeds": prompt_embeds, "pooled_prompt_embeds": pooled}[spec["output"]].float().contiguous()
    if spec["scale"] is not None:
        args["joint_attention_kwargs"] = {"scale": spec["scale"]}
    generator = torch.Generator("cpu").manual_seed(spec["seed"])
    return pipe(**args, generator=generator).images.float().contiguous()


def write_flux_adapters():
    """Authors the Flux adapters on a scratch pipeline; writes the files; returns the source adapters and skips."""
    pipe = fresh("tiny-flux")
    assert linear_names(pipe.transformer) == sorted(FLUX_LINEARS)
    tr, te, t5 = pipe.transformer, pipe.text_encoder, pipe.text_encoder_2
    style_cfg = LoraConfig(r=4, lora_alpha=8, target_modules=FLUX_LINEARS, rank_pattern=FLUX_STYLE_PATTERNS[0],
                           alpha_pattern=FLUX_STYLE_PATTERNS[1])
    te_cfg = LoraConfig(r=4, lora_alpha=4, target_modules=CLIP_TARGETS)
    style_tr = add_adapter(tr, "style", style_cfg, 10_000, FLUX_TIED)
    style_te = add_adapter(te, "style", te_cfg, 20_000)
    FluxPipeline.save_lora_weights(out, transformer_lora_layers=style_tr, text_encoder_lora_layers=style_te,
                                   transformer_lora_adapter_metadata=metadata_of(style_cfg),
                                   text_encoder_lora_adapter_metadata=metadata_of(te_cfg), weight_name="flux-style.safetensors")
    style = {**read_back(tr, "style", "transformer."), **read_back(te, "style", "text_encoder.")}
    assert len([m for m in style if m.startswith("transformer.")]) == len(FLUX_LINEARS)

    detail_cfg = LoraConfig(r=8, lora_alpha=4, target_modules=FLUX_DETAIL_TARGETS)
    detail_tr = add_adapter(tr, "detail", detail_cfg, 30_000)
    FluxPipeline.save_lora_weights(out, transformer_lora_layers=detail_tr, weight_name="flux-detail.safetensors")
    detail = read_back(tr, "detail", "transformer.")

    t5_cfg = LoraConfig(r=4, lora_alpha=8, target_modules=T5_TARGETS)
    t5_sd = add_adapter(t5, "t5", t5_cfg, 40_000)
    FluxPipeline._save_lora_weights(out, lora_layers={"text_encoder_2": t5_sd}, lora_metadata={"text_encoder_2": metadata_of(t5_cfg)},
                                    weight_name="flux-t5.safetensors")
    t5_src = read_back(t5, "t5", "text_encoder_2.")
    t5.set_adapter("t5")
    with torch.no_grad():
        t5_embeds = pipe.encode_prompt(**ENCODE_ARGS)[0]

    sources = {"flux-style.safetensors": (style, {}), "flux-detail.safetensors": (detail, {}), "flux-t5.safetensors": (t5_src, {})}
    for file, convert in (("flux-style-kohya.safetensors", to_kohya), ("flux-style-bfl.safetensors", to_bfl),
                          ("flux-xlabs.safetensors", to_xlabs)):
        sd, skipped = convert(style)
        save_file(sd, out / file)
        diffusers_sd, unprefixed = check_state_dict(out / file, style, skipped)
        save_file({k: v.float().contiguous().clone() for k, v in diffusers_sd.items()}, out / file.replace(".safetensors", ".diffusers.safetensors"))
        skipped = {**skipped, **{m: PREFIX_NOTE for m in unprefixed}}
        sources[file] = (style, skipped)
        print(f"{file}: {len(sd)} tensors; lora_state_dict matches the source; not expressible / dropped: {len(skipped)}")
    return sources, t5_embeds


def write_sd3_adapter():
    pipe = fresh("tiny-sd3")
    assert linear_names(pipe.transformer) == sorted(SD3_LINEARS)
    tr_cfg = LoraConfig(r=4, lora_alpha=8, target_modules=SD3_LINEARS, rank_pattern=SD3_STYLE_PATTERNS[0],
                        alpha_pattern=SD3_STYLE_PATTERNS[1])
    te_cfg = LoraConfig(r=4, lora_alpha=4, target_modules=CLIP_TARGETS)
    te2_cfg = LoraConfig(r=2, lora_alpha=4, target_modules=CLIP_TARGETS)
    layers = {"transformer": add_adapter(pipe.transformer, "style", tr_cfg, 50_000),
              "text_encoder": add_adapter(pipe.text_encoder, "style", te_cfg, 60_000),
              "text_encoder_2": add_adapter(pipe.text_encoder_2, "style", te2_cfg, 70_000)}
    StableDiffusion3Pipeline.save_lora_weights(
        out, transformer_lora_layers=layers["transformer"], text_encoder_lora_layers=layers["text_encoder"],
        text_encoder_2_lora_layers=layers["text_encoder_2"], transformer_lora_adapter_metadata=metadata_of(tr_cfg),
        text_encoder_lora_adapter_metadata=metadata_of(te_cfg), text_encoder_2_lora_adapter_metadata=metadata_of(te2_cfg),
        weight_name="sd3-style.safetensors")
    return loaded_records(pipe, "style")


def main():
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)  # PEFT's own init of lora_A (overwritten) draws from the global generator
    sources, t5_embeds = write_flux_adapters()
    sd3_source = write_sd3_adapter()
    sources["sd3-style.safetensors"] = (sd3_source, {})
    for f in sorted(out.glob("*.safetensors")):
        before = load_file(f)
        canonical_header(f)
        after = load_file(f)
        assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)

    # modules.json: each file loaded alone into a fresh pipeline
    modules = {}
    adapter_names = {"flux-style.safetensors": "style", "flux-detail.safetensors": "detail", "flux-style-kohya.safetensors": "x",
                     "flux-style-bfl.safetensors": "x", "flux-xlabs.safetensors": "x", "flux-t5.safetensors": "t5",
                     "sd3-style.safetensors": "style"}
    for file, name in adapter_names.items():
        pipeline = "tiny-sd3" if file.startswith("sd3") else "tiny-flux"
        pipe = fresh(pipeline)
        before = len(warnings_seen)
        load(pipe, adapter(file, name, "peft" if file == "flux-t5.safetensors" else "diffusers"))
        records = loaded_records(pipe, name)
        source, skipped = sources[file]
        if file == "flux-detail.safetensors":
            # no metadata and no alphas: diffusers takes alpha = rank (scale 1), not the authored 4 / 8
            assert all(r["scale"] == 1.0 and r["rank"] == 8 and r["alpha"] == 8 for r in records.values())
            assert set(records) == set(source)
        else:
            missing = check_loaded(records, source, skipped, file)
            assert missing == sorted(skipped), f"{file}: {sorted(set(missing) ^ set(skipped))}"
        modules[file] = {"adapter_name": name,
                         "loaded": [{"module": m, "rank": r["rank"], "alpha": r["alpha"], "scale": r["scale"]} for m, r in records.items()],
                         "not_loaded": dict(sorted(skipped.items()))}
        print(f"{file}: {len(records)} LoRA layers loaded, {len(skipped)} not;", "warnings:", warnings_seen[before:] or "none")

    references = {}
    with torch.no_grad():
        for name, spec in CASES.items():
            references[name] = run(name, spec)
    assert torch.equal(references["flux.t5.prompt_embeds"], t5_embeds.float()), "the T5 file does not reproduce its source"
    for name, spec in CASES.items():
        t = references[name]
        for other in spec["differs_from"]:
            rel = ((t - references[other]).abs().max() / references[other].abs().max()).item()
            print(f"{name} vs {other}: max |diff| / max |{other}| = {rel:.4f}")
            assert rel > 20 * 2e-3, f"{name} is too close to {other}"
        for other in spec["equals"]:
            assert torch.equal(t, references[other]), f"{name} should equal {other}"
            print(f"{name} == {other}")

    save_file(references, out / "references.safetensors")
    (out / "cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    (out / "modules.json").write_text(json.dumps(modules, indent=1) + "\n")
    for k, v in references.items():
        print(k, list(v.shape))
    canonical_header(out / "references.safetensors")
    for f in sorted(out.iterdir()):
        print(f.name, f.stat().st_size)


if __name__ == "__main__":
    main()
