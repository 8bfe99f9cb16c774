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


def build(tmp):
    spec = tiny_spec("tiny-sd3")
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
        pipe, keys = build(tmp)
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


if __name__ == "__main__":
    main()
