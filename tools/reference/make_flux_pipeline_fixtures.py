"""diffusers references for @dtorch/hf's FluxPipeline: the built-in tiny-flux, end to end.

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_flux_pipeline_fixtures.py
Builds diffusers' FluxPipeline from packages/hf/assets/tiny-pipelines/tiny-flux.json (the configs
FluxPipeline.tiny() reads), each model filled by random_weights.fill_random_weights with the
file's seeds, the tokenizers from packages/hf/assets/tiny-tokenizers (unpacked to a temporary
folder), and runs the cases below. Writes to tests/fixtures/hf/pipelines/:
  tiny-flux-keys.json            each component's sorted parameter keys (the order the weights
                                 are drawn in; T5's tied embedding is listed once, as "shared.weight";
                                 transformers 5's CLIPTextModel names them without "text_model.")
  tiny-flux.safetensors          float32, for each case <name>:
    "<name>.latent"              output_type="latent": the final packed latents [B, tokens, 64]
    "<name>.image"               output_type="pt": [B, 3, H, W] in [0, 1]
  and "encode.prompt_embeds", "encode.pooled_prompt_embeds" (encode_prompt of "a photo of a cat",
  max_sequence_length 16), and "one.bf16.latent", "one.bf16.image": case "one" with every
  component cast to bfloat16 (pipe.to(torch.bfloat16)), stored as float32
  tiny-flux-cases.json           each case's arguments (prompts, size, steps, seed, ...)
"""
import json
import pathlib
import shutil
import tempfile

import torch
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer, T5Config, T5EncoderModel, T5TokenizerFast

from random_weights import fill_random_weights
from tiny_pipeline_assets import component_config, tiny_spec, unpack_tokenizer

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "pipelines"

LONG = " ".join(["a very long prompt about a small red house on a green hill under a blue sky"] * 6)

CASES = [
    # one prompt, a square image, three steps
    {"name": "one", "prompt": "a photo of a cat", "height": 64, "width": 64, "num_inference_steps": 3, "seed": 0,
     "max_sequence_length": 16},
    # two prompts (the second longer than CLIP's 77 tokens and T5's 16: truncated), not square, guidance 5
    {"name": "two", "prompt": ["a dog on a red sofa", LONG], "height": 32, "width": 64, "num_inference_steps": 2,
     "seed": 1, "max_sequence_length": 16, "guidance_scale": 5.0},
    # true classifier-free guidance with a negative prompt
    {"name": "cfg", "prompt": "a lighthouse at night", "negative_prompt": "blurry, low quality", "true_cfg_scale": 4.0,
     "height": 48, "width": 48, "num_inference_steps": 2, "seed": 2, "max_sequence_length": 12},
    # two images of one prompt
    {"name": "per-prompt", "prompt": "a bowl of fruit", "num_images_per_prompt": 2, "height": 32, "width": 32,
     "num_inference_steps": 2, "seed": 3, "max_sequence_length": 8},
]


def build():
    spec = tiny_spec("tiny-flux")
    config_of = lambda name: component_config(spec, name)  # noqa: E731
    seeds = spec["seeds"]
    text_encoder = CLIPTextModel(CLIPTextConfig(**config_of("text_encoder"))).eval()
    text_encoder_2 = T5EncoderModel(T5Config(**config_of("text_encoder_2"))).eval()
    transformer = FluxTransformer2DModel(**config_of("transformer")).eval()
    vae = AutoencoderKL(**config_of("vae")).eval()
    models = {"text_encoder": text_encoder, "text_encoder_2": text_encoder_2, "transformer": transformer, "vae": vae}
    # T5's embedding is tied: one parameter, listed (and drawn) once under "shared.weight"
    assert text_encoder_2.shared.weight is text_encoder_2.encoder.embed_tokens.weight
    keys = {}
    for name, model in models.items():
        fill_random_weights(model, seeds[name])
        keys[name] = sorted(k for k, _ in model.named_parameters())
    assert "shared.weight" in keys["text_encoder_2"] and "encoder.embed_tokens.weight" not in keys["text_encoder_2"]
    scheduler = FlowMatchEulerDiscreteScheduler(**config_of("scheduler"))
    tmp = pathlib.Path(tempfile.mkdtemp())
    try:
        tokenizer = CLIPTokenizer.from_pretrained(unpack_tokenizer(spec["tokenizers"]["tokenizer"], tmp))
        tokenizer_2 = T5TokenizerFast.from_pretrained(unpack_tokenizer(spec["tokenizers"]["tokenizer_2"], tmp))
    finally:
        shutil.rmtree(tmp)
    pipe = FluxPipeline(scheduler=scheduler, vae=vae, text_encoder=text_encoder, tokenizer=tokenizer,
                        text_encoder_2=text_encoder_2, tokenizer_2=tokenizer_2, transformer=transformer)
    return pipe, keys


def main():
    pipe, keys = build()
    out.mkdir(parents=True, exist_ok=True)
    tensors = {}
    with torch.no_grad():
        embeds, pooled, _ = pipe.encode_prompt("a photo of a cat", None, max_sequence_length=16)
        tensors["encode.prompt_embeds"] = embeds
        tensors["encode.pooled_prompt_embeds"] = pooled
        for case in CASES:
            args = {k: v for k, v in case.items() if k not in ("name", "seed")}
            for output_type, key in (("latent", "latent"), ("pt", "image")):
                generator = torch.Generator("cpu").manual_seed(case["seed"])
                images = pipe(**args, generator=generator, output_type=output_type).images
                tensors[f"{case['name']}.{key}"] = images.float().contiguous()
        pipe = pipe.to(torch.bfloat16)
        one = {k: v for k, v in CASES[0].items() if k not in ("name", "seed")}
        for output_type, key in (("latent", "latent"), ("pt", "image")):
            generator = torch.Generator("cpu").manual_seed(CASES[0]["seed"])
            tensors[f"one.bf16.{key}"] = pipe(**one, generator=generator, output_type=output_type).images.float().contiguous()
    save_file(tensors, out / "tiny-flux.safetensors")
    (out / "tiny-flux-keys.json").write_text(json.dumps(keys, indent=1) + "\n")
    (out / "tiny-flux-cases.json").write_text(json.dumps(CASES, indent=1) + "\n")
    for k, v in tensors.items():
        print(k, list(v.shape))


if __name__ == "__main__":
    main()
