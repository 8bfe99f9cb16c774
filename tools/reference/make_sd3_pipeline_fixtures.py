"""diffusers references for @dtorch/hf's StableDiffusion3Pipeline and its built-in tiny-sd3.

Run from the repository root with the setup's Python and diffusers' sources:
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_sd3_pipeline_fixtures.py
Builds diffusers' StableDiffusion3Pipeline from packages/hf/assets/tiny-pipelines/tiny-sd3.json
(the configs DTorch's tiny-sd3 reads), every component filled by fill_random_weights with the
component's seed (random_weights.py: as DTorch's fillRandomWeights), the tokenizers from
packages/hf/assets/tiny-tokenizers, and runs it on the CPU in float32 for the cases below.
Writes tests/fixtures/hf/pipelines/:
  tiny-sd3-cases.json: the cases (the pipeline's arguments, seed for the generator's)
  tiny-sd3-keys.json: per component, its sorted parameter keys (what fill_random_weights
    numbers; DTorch's must list the same)
  tiny-sd3.safetensors: for each case <name>, "<name>.latents" (output_type="latent") and
    "<name>.images" (output_type="pt": [B, 3, H, W] in [0, 1]); for case "one" also its
    encode_prompt outputs "one.prompt_embeds", "one.pooled_prompt_embeds",
    "one.negative_prompt_embeds", "one.negative_pooled_prompt_embeds", and "one.bf16.latents",
    "one.bf16.images": case "one" with every component cast to bfloat16 (pipe.to(torch.bfloat16)),
    stored as float32
  sd3-diffusers-test.json, sd3-diffusers-test.safetensors: the same for the configuration of diffusers'
    own fast test (tests/pipelines/stable_diffusion_3/test_pipeline_stable_diffusion_3.py,
    get_dummy_components and get_dummy_inputs): two CLIPs of hidden 32 and a T5 of width 32, so
    the CLIPs' 64 channels are cropped to T5's 32 (F.pad with a negative pad); the .json is the
    spec (as assets/tiny-pipelines/*.json) and the case, the .safetensors "latents", "images",
    "prompt_embeds", "pooled_prompt_embeds", "negative_prompt_embeds",
    "negative_pooled_prompt_embeds"
"""
import json
import pathlib
import tempfile

import torch
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel, StableDiffusion3Pipeline
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModelWithProjection, CLIPTokenizer, T5Config, T5EncoderModel, T5TokenizerFast

from random_weights import fill_random_weights
from tiny_pipeline_assets import component_config, tiny_spec, unpack_tokenizer

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

CASES = {
    # CFG with the default negative prompt "", prompt_3 apart, a short T5 length
    "one": dict(prompt="a photo of a cat", prompt_3="a photo of a cat, as T5 reads it", num_inference_steps=3, seed=0, max_sequence_length=32),
    # two prompts (dp=2), a negative prompt, a size that is not square, another guidance scale
    "two": dict(prompt=["a red fox in the snow", "an astronaut riding a horse"], negative_prompt="blurry", num_inference_steps=2, seed=1, height=32, width=48, guidance_scale=5.0, max_sequence_length=16),
    # no CFG (guidance 1), two images of one prompt
    "three": dict(prompt="a lighthouse", num_inference_steps=2, seed=3, guidance_scale=1.0, num_images_per_prompt=2, max_sequence_length=16),
}


# diffusers' fast test's components (get_dummy_components), with weights from fill_random_weights
# and DTorch's tiny tokenizers in place of hf-internal-testing's (the hub is out of reach): the
# CLIPs' vocabulary is the real CLIP BPE's, the T5's the tiny SentencePiece's, and the T5 (whose
# config diffusers reads from hf-internal-testing/tiny-random-t5) keeps the width that matters, 32
DIFFUSERS_TEST_CLIP = dict(
    bos_token_id=0, eos_token_id=2, hidden_size=32, intermediate_size=37, layer_norm_eps=1e-05, num_attention_heads=4,
    num_hidden_layers=5, pad_token_id=1, vocab_size=49408, hidden_act="gelu", projection_dim=32,
)
DIFFUSERS_TEST_SPEC = {
    "model_index": tiny_spec("tiny-sd3")["model_index"],
    "seeds": {"text_encoder": 110, "text_encoder_2": 220, "text_encoder_3": 330, "transformer": 440, "vae": 550},
    "tokenizers": {"tokenizer": "clip", "tokenizer_2": "clip", "tokenizer_3": "t5"},
    "scheduler": {},
    "text_encoder": DIFFUSERS_TEST_CLIP,
    "text_encoder_2": DIFFUSERS_TEST_CLIP,
    "text_encoder_3": dict(vocab_size=1600, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4, relative_attention_num_buckets=8, dropout_rate=0.0),
    "transformer": dict(
        sample_size=32, patch_size=1, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=4,
        caption_projection_dim=32, joint_attention_dim=32, pooled_projection_dim=64, out_channels=4,
    ),
    "vae": dict(
        sample_size=32, in_channels=3, out_channels=3, block_out_channels=[4], layers_per_block=1, latent_channels=4,
        norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609, scaling_factor=1.5035,
    ),
}
# get_dummy_inputs (output_type aside)
DIFFUSERS_TEST_CASE = dict(prompt="A painting of a squirrel eating a burger", num_inference_steps=2, guidance_scale=5.0, seed=0)


def build(tmp, spec):
    cfg = lambda name: component_config(spec, name)  # noqa: E731
    modules = {
        "text_encoder": CLIPTextModelWithProjection(CLIPTextConfig(**cfg("text_encoder"))),
        "text_encoder_2": CLIPTextModelWithProjection(CLIPTextConfig(**cfg("text_encoder_2"))),
        "text_encoder_3": T5EncoderModel(T5Config(**cfg("text_encoder_3"))),
        "transformer": SD3Transformer2DModel(**cfg("transformer")),
        "vae": AutoencoderKL(**cfg("vae")),
    }
    keys = {}
    for name, module in modules.items():
        module.eval()
        fill_random_weights(module, spec["seeds"][name])
        keys[name] = sorted(k for k, _ in module.named_parameters())
    # T5's embedding is shared by `shared` and `encoder.embed_tokens` (one parameter, listed once)
    t5 = modules["text_encoder_3"]
    assert t5.shared.weight is t5.encoder.embed_tokens.weight, "T5's shared and encoder.embed_tokens must be tied"
    folders = {name: unpack_tokenizer(name, tmp) for name in ("clip", "t5")}
    pipe = StableDiffusion3Pipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(**cfg("scheduler")),
        tokenizer=CLIPTokenizer.from_pretrained(folders[spec["tokenizers"]["tokenizer"]]),
        tokenizer_2=CLIPTokenizer.from_pretrained(folders[spec["tokenizers"]["tokenizer_2"]]),
        tokenizer_3=T5TokenizerFast.from_pretrained(folders[spec["tokenizers"]["tokenizer_3"]]),
        **modules,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe, keys


@torch.no_grad()
def main():
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    with tempfile.TemporaryDirectory() as tmp:
        pipe, keys = build(tmp, tiny_spec("tiny-sd3"))
        for name, case in CASES.items():
            args = {k: v for k, v in case.items() if k != "seed"}
            for output_type, key in (("latent", "latents"), ("pt", "images")):
                result = pipe(**args, generator=torch.Generator("cpu").manual_seed(case["seed"]), output_type=output_type)
                tensors[f"{name}.{key}"] = result.images.float().contiguous()
        one = CASES["one"]
        embeds = pipe.encode_prompt(prompt=one["prompt"], prompt_2=None, prompt_3=one["prompt_3"], max_sequence_length=one["max_sequence_length"], do_classifier_free_guidance=True)
        for key, t in zip(("prompt_embeds", "negative_prompt_embeds", "pooled_prompt_embeds", "negative_pooled_prompt_embeds"), embeds):
            tensors[f"one.{key}"] = t.float().contiguous()
        pipe = pipe.to(torch.bfloat16)
        args = {k: v for k, v in one.items() if k != "seed"}
        for output_type, key in (("latent", "latents"), ("pt", "images")):
            result = pipe(**args, generator=torch.Generator("cpu").manual_seed(one["seed"]), output_type=output_type)
            tensors[f"one.bf16.{key}"] = result.images.float().contiguous()
    save_file(tensors, out / "tiny-sd3.safetensors")
    (out / "tiny-sd3-cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    (out / "tiny-sd3-keys.json").write_text(json.dumps(keys, indent=1) + "\n")
    for k, t in tensors.items():
        print(k, list(t.shape))
    diffusers_test()


@torch.no_grad()
def diffusers_test():
    tensors = {}
    case = DIFFUSERS_TEST_CASE
    with tempfile.TemporaryDirectory() as tmp:
        pipe, _ = build(tmp, DIFFUSERS_TEST_SPEC)
        args = {k: v for k, v in case.items() if k != "seed"}
        for output_type, key in (("latent", "latents"), ("pt", "images")):
            result = pipe(**args, generator=torch.Generator("cpu").manual_seed(case["seed"]), output_type=output_type)
            tensors[key] = result.images.float().contiguous()
        embeds = pipe.encode_prompt(prompt=case["prompt"], prompt_2=None, prompt_3=None, do_classifier_free_guidance=True)
        for key, t in zip(("prompt_embeds", "negative_prompt_embeds", "pooled_prompt_embeds", "negative_pooled_prompt_embeds"), embeds):
            tensors[key] = t.float().contiguous()
    assert tensors["prompt_embeds"].shape[-1] == 32 and tensors["pooled_prompt_embeds"].shape[-1] == 64
    save_file(tensors, out / "sd3-diffusers-test.safetensors")
    (out / "sd3-diffusers-test.json").write_text(json.dumps({"spec": DIFFUSERS_TEST_SPEC, "case": case}, indent=1) + "\n")
    for k, t in tensors.items():
        print("sd3-diffusers-test", k, list(t.shape))


if __name__ == "__main__":
    main()
