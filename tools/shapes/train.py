"""Trains shapes-flux: a FLUX.1-architecture pipeline at a tiny size that draws what it is asked, from
scenes it draws itself (scenes.py), with diffusers' and transformers' own classes.

    PYTHONPATH=<diffusers>/src python3 tools/shapes/train.py --out /tmp/shapes-flux           # the shipped run (GPU)
    PYTHONPATH=<diffusers>/src python3 tools/shapes/train.py --out /tmp/smoke --vae-steps 20 --steps 20 --eval 4   # a smoke run

Stages: (1) the VAE (AutoencoderKL) learns to reconstruct drawn scenes; its latents' mean and spread
become shift_factor and scaling_factor; (2) the transformer (FluxTransformer2DModel) and both text
encoders (CLIPTextModel, T5EncoderModel, trained jointly from random) learn rectified flow on the
VAE's latents, captions dropped 10% of the time so that true CFG with an empty negative prompt works;
an exponential moving average of their weights is what is saved; (3) the pipeline is saved in
diffusers' folder layout (bf16 weights) and evaluated: scenes.check over held-out captions.

Deterministic given --seed, the machine and the library versions (train_log.json records them):
every scene comes from a generator keyed by its index, the torch generators are seeded, and
torch.use_deterministic_algorithms is on (it warns where CUDA has no deterministic kernel; the log
keeps those warnings).
"""
import argparse
import json
import math
import multiprocessing
import os
import pathlib
import platform
import sys
import tempfile
import time
import warnings

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS; before CUDA starts

import numpy as np
import torch
import transformers
import diffusers
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer, CLIPTokenizerFast, T5Config, T5EncoderModel, T5TokenizerFast

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scenes  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "reference"))
from tiny_pipeline_assets import unpack_tokenizer  # noqa: E402

# T5's padded length: the model runs at SHORT_TOKENS (its own default, 5x less text to attend to than
# FluxPipeline's 512) and learns 512 too (every LONG_EVERY-th batch), so that a call that keeps
# diffusers' default max_sequence_length still draws what it is asked
T5_TOKENS = 512
SHORT_TOKENS = 96
LONG_EVERY = 5
CLIP_TOKENS = 77


def components(seed):
    """The pipeline's parts at their sizes, freshly initialised (torch seeded per part)."""
    torch.manual_seed(seed)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4,
        block_out_channels=[16, 32, 64, 64], layers_per_block=1, act_fn="silu", latent_channels=16,
        norm_num_groups=8, sample_size=scenes.SIZE, scaling_factor=1.0, shift_factor=0.0,
        force_upcast=True, use_quant_conv=False, use_post_quant_conv=False, mid_block_add_attention=True,
    )
    torch.manual_seed(seed + 1)
    clip = CLIPTextModel(CLIPTextConfig(
        vocab_size=49408, hidden_size=16, intermediate_size=64, projection_dim=16, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=CLIP_TOKENS, hidden_act="quick_gelu", layer_norm_eps=1e-5,
        attention_dropout=0.0, bos_token_id=49406, eos_token_id=49407, pad_token_id=49407,
    ))
    torch.manual_seed(seed + 2)
    t5 = T5EncoderModel(T5Config(
        vocab_size=1600, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
        relative_attention_num_buckets=32, relative_attention_max_distance=128, dropout_rate=0.0,
        layer_norm_epsilon=1e-6, feed_forward_proj="gated-gelu", is_encoder_decoder=False,
        tie_word_embeddings=False, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    ))
    torch.manual_seed(seed + 3)
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=64, num_layers=2, num_single_layers=4, attention_head_dim=40,
        num_attention_heads=4, joint_attention_dim=64, pooled_projection_dim=16, guidance_embeds=False,
        axes_dims_rope=[8, 16, 16],
    )
    # dynamic shifting as FLUX.1, with the base at this model's 64 image tokens (128² pixels)
    scheduler = FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000, shift=1.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
        base_image_seq_len=64, max_image_seq_len=1024,
    )
    return vae, clip, t5, transformer, scheduler


def _render_range(job):
    seed, stream, start, stop, held_out = job
    chosen = [scenes.scene_for(seed, stream, i, held_out) for i in range(start, stop)]
    return np.stack([np.asarray(scenes.draw(c)) for c in chosen]), [c["caption"] for c in chosen]


def render(seed, stream, count, workers, held_out=False):
    """Scenes 0..count-1 of a stream, drawn by `workers` processes: (N, 3, H, W) uint8 pictures and
    their captions, in index order whatever the number of processes."""
    chunk = 500
    jobs = [(seed, stream, a, min(count, a + chunk), held_out) for a in range(0, count, chunk)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_render_range, jobs)
    else:
        parts = [_render_range(j) for j in jobs]
    pixels = torch.from_numpy(np.concatenate([p for p, _ in parts])).permute(0, 3, 1, 2).contiguous()
    return pixels, [c for _, cs in parts for c in cs]


def tokenize(tokenizers, captions):
    """Both encoders' token ids for captions, padded as FluxPipeline pads them."""
    clip_tok, t5_tok = tokenizers
    clip_ids = clip_tok(captions, padding="max_length", max_length=CLIP_TOKENS, truncation=True, return_tensors="pt").input_ids
    t5_ids = t5_tok(captions, padding="max_length", max_length=T5_TOKENS, truncation=True, return_tensors="pt").input_ids
    return clip_ids, t5_ids


def to_unit(pixels):
    return pixels.float() / 127.5 - 1


def cosine(step, total, warmup):
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def train_vae(vae, args, log):
    device = args.device
    vae.to(device).train()
    opt = torch.optim.AdamW(vae.parameters(), lr=args.vae_lr, weight_decay=0.0)
    start = time.time()
    pixels, _ = render(args.seed, 0, args.vae_scenes, args.workers)
    pixels = pixels.to(device)
    log["seconds"]["vae_render"] = round(time.time() - start, 1)
    generator = torch.Generator(device).manual_seed(args.seed + 20)
    for step in range(args.vae_steps):
        for group in opt.param_groups:
            group["lr"] = args.vae_lr * cosine(step, args.vae_steps, 100)
        x = to_unit(pixels[torch.randint(len(pixels), (args.vae_batch,), device=device, generator=generator)])
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            posterior = vae.encode(x).latent_dist
            z = posterior.sample(generator=generator)
            y = vae.decode(z).sample.float()
        recon = (y - x).abs().mean() + ((y - x) ** 2).mean()
        kl = posterior.kl().mean() / x[0].numel()
        loss = recon + args.vae_kl * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        if step % 250 == 0 or step == args.vae_steps - 1:
            entry = {"stage": "vae", "step": step, "recon": round(recon.item(), 5), "kl": round(kl.item(), 5), "s": round(time.time() - start, 1)}
            log["losses"].append(entry)
            print(json.dumps(entry), flush=True)
    log["seconds"]["vae"] = round(time.time() - start, 1)
    vae.eval()


@torch.no_grad()
def encode(vae, pixels, device):
    """The VAE's latents (its posterior's mode) of uint8 pictures, 256 at a time, in float32."""
    out = []
    for a in range(0, len(pixels), 256):
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda")):
            out.append(vae.encode(to_unit(pixels[a:a + 256].to(device))).latent_dist.mode().float())
    return torch.cat(out)


def pack(latents):
    b, c, h, w = latents.shape
    return FluxPipeline._pack_latents(latents, b, c, h, w)


def train_flow(vae, clip, t5, transformer, args, tokenizers, log):
    """Rectified flow on the VAE's latents of `--scenes` rendered scenes, batches drawn at random
    (the whole set lives on the device); a caption is emptied with probability 0.1 per draw."""
    device = args.device
    start = time.time()
    pixels, captions = render(args.seed, 1, args.scenes, args.workers)
    vae.to(device).eval()
    latents_all = pack(encode(vae, pixels, device))
    # FLUX.1's normalisation: shift_factor and scaling_factor from the latents' mean and spread
    mean, std = latents_all.mean().item(), latents_all.std().item()
    if not args.init:  # a continued run keeps the factors its transformer was trained with
        vae.register_to_config(shift_factor=round(mean, 4), scaling_factor=round(1 / std, 4))
    latents_all = (latents_all - vae.config.shift_factor) * vae.config.scaling_factor
    clip_all, t5_all = (ids.to(device) for ids in tokenize(tokenizers, captions))
    clip_empty, t5_empty = (ids.to(device) for ids in tokenize(tokenizers, [""]))
    del pixels
    log["seconds"]["flow_render"] = round(time.time() - start, 1)
    print(json.dumps({"shift_factor": vae.config.shift_factor, "scaling_factor": vae.config.scaling_factor, "s": log["seconds"]["flow_render"]}), flush=True)

    for m in (clip, t5, transformer):
        m.to(device).train()
    params = [p for m in (transformer, clip, t5) for p in m.parameters()]
    ema = [p.detach().clone() for p in params]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.99))
    side = scenes.SIZE // 8  # latent side: the VAE halves three times
    img_ids = FluxPipeline._prepare_latent_image_ids(1, side // 2, side // 2, device, torch.float32)
    generator = torch.Generator(device).manual_seed(args.seed + 10)
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda"))
    start = time.time()
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = args.lr * cosine(step, args.steps, 300)
        idx = torch.randint(len(latents_all), (args.batch,), device=device, generator=generator)
        drop = (torch.rand(args.batch, device=device, generator=generator) < 0.1)[:, None]
        latents = latents_all[idx]
        clip_ids = torch.where(drop, clip_empty, clip_all[idx])
        tokens = T5_TOKENS if step % LONG_EVERY == LONG_EVERY - 1 else SHORT_TOKENS  # captions are at most 64 tokens: none is cut at 96
        t5_ids = torch.where(drop, t5_empty, t5_all[idx])[:, :tokens]
        txt_ids = torch.zeros(tokens, 3, device=device)
        noise = torch.randn(latents.shape, device=device, generator=generator)
        # logit-normal times (as SD3 and FLUX.1 train): most of the weight on the middle of the path
        sigma = torch.sigmoid(torch.randn(latents.shape[0], device=device, generator=generator))
        noisy = (1 - sigma[:, None, None]) * latents + sigma[:, None, None] * noise
        with autocast:
            pooled = clip(clip_ids).pooler_output
            text = t5(t5_ids).last_hidden_state
            pred = transformer(hidden_states=noisy, timestep=sigma, guidance=None, pooled_projections=pooled,
                               encoder_hidden_states=text, txt_ids=txt_ids, img_ids=img_ids, return_dict=False)[0]
        loss = ((pred.float() - (noise - latents)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            decay = min(args.ema, (1 + step) / (10 + step))
            torch._foreach_lerp_(ema, [p.detach() for p in params], 1 - decay)
        if args.checkpoint and step % 2000 == 1999:
            torch.save({"step": step, "ema": [e.cpu() for e in ema], "vae": vae.state_dict(), "vae_config": dict(vae.config)}, args.checkpoint)
        if step % 250 == 0 or step == args.steps - 1:
            entry = {"stage": "flow", "step": step, "loss": round(loss.item(), 5), "s": round(time.time() - start, 1)}
            log["losses"].append(entry)
            print(json.dumps(entry), flush=True)
    log["seconds"]["flow"] = round(time.time() - start, 1)
    with torch.no_grad():
        for p, e in zip(params, ema):
            p.copy_(e)
    for m in (clip, t5, transformer):
        m.eval()


def save(pipe, out):
    """The pipeline in diffusers' layout with bf16 weights; the tokenizer folders are left out (DTorch
    ships them once, in assets/tiny-tokenizers) and model_index.json still names their classes."""
    pipe.to("cpu", torch.bfloat16)
    pipe.save_pretrained(out, safe_serialization=True)
    pipe.to(torch.float32)
    for name in ("tokenizer", "tokenizer_2"):
        for f in (pathlib.Path(out) / name).iterdir():
            f.unlink()
        (pathlib.Path(out) / name).rmdir()


@torch.no_grad()
def evaluate(pipe, args, count, steps, true_cfg_scale, tokens):
    """scenes.check over `count` held-out captions (stream 2), one seed each: the share that pass.
    The first 16 pictures go to samples-cfg<scale>-t5-<tokens>.png, a 4 x 4 grid, their captions in order."""
    pipe.to(args.device)
    results, pictures = [], []
    for start in range(0, count, 25):
        batch = [scenes.scene_for(args.seed, 2, i, want_held_out=True)["caption"] for i in range(start, min(count, start + 25))]
        generators = [torch.Generator("cpu").manual_seed(i) for i in range(start, start + len(batch))]
        extra = {"negative_prompt": [""] * len(batch), "true_cfg_scale": true_cfg_scale} if true_cfg_scale > 1 else {}
        images = pipe(batch, height=scenes.SIZE, width=scenes.SIZE, num_inference_steps=steps, generator=generators,
                      max_sequence_length=tokens, output_type="np", **extra).images
        for caption, image in zip(batch, images):
            pixels = (image * 255).round().astype(np.uint8)
            results.append({"caption": caption, **scenes.check(pixels, caption)})
            pictures.append(pixels)
    grid = np.concatenate([np.concatenate(pictures[r * 4:r * 4 + 4], axis=1) for r in range(min(4, len(pictures) // 4))], axis=0) if len(pictures) >= 4 else None
    if grid is not None:
        from PIL import Image
        Image.fromarray(grid).save(pathlib.Path(args.out) / f"samples-cfg{true_cfg_scale:g}-t5-{tokens}.png")
    share = lambda key: round(sum(1 for r in results if key(r)) / len(results), 3)  # noqa: E731
    return {
        "captions": len(results), "steps": steps, "true_cfg_scale": true_cfg_scale, "max_sequence_length": tokens,
        "accuracy": share(lambda r: r["ok"]), "background": share(lambda r: r["background"]),
        "objects": share(lambda r: all(r["objects"])), "captions_shown": [r["caption"] for r in results[:16]],
        "failures": [r["caption"] for r in results if not r["ok"]][:20],
    }


def probe(vae, clip, t5, transformer, args, tokenizers, log):
    """Steps per second of each stage (the first 20 steps not counted) and the scenes drawn per
    second: what --vae-steps, --steps and --scenes cost on this machine."""
    rates = {}
    args.vae_scenes = args.scenes = 4000
    for stage, run in (("vae", lambda: train_vae(vae, args, log)),
                       ("flow", lambda: train_flow(vae, clip, t5, transformer, args, tokenizers, log))):
        args.vae_steps = args.steps = 20
        run()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        args.vae_steps = args.steps = 120
        start = time.time()
        run()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        rendering = log["seconds"]["vae_render" if stage == "vae" else "flow_render"]
        rates[stage] = round(120 / (time.time() - start - rendering), 2)
    rates["scenes"] = round(4000 / log["seconds"]["vae_render"], 1)
    print(json.dumps({"steps_per_second": rates}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the pipeline folder to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--vae-steps", type=int, default=3000)
    p.add_argument("--vae-batch", type=int, default=32)
    p.add_argument("--vae-scenes", type=int, default=20000, help="scenes drawn for the VAE")
    p.add_argument("--scenes", type=int, default=100000, help="scenes drawn for the transformer")
    p.add_argument("--vae-lr", type=float, default=1e-3)
    p.add_argument("--vae-kl", type=float, default=1e-4)
    p.add_argument("--steps", type=int, default=12000, help="transformer steps (20 for a smoke run)")
    p.add_argument("--batch", type=int, default=192)
    p.add_argument("--lr", type=float, default=4e-4)
    p.add_argument("--ema", type=float, default=0.999)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes that draw scenes")
    p.add_argument("--eval", type=int, default=100, help="held-out captions to evaluate")
    p.add_argument("--eval-steps", type=int, default=20)
    p.add_argument("--checkpoint", help="a file to keep the averaged weights in every 2,000 steps")
    p.add_argument("--init", help="a pipeline folder this script wrote: its VAE (with --vae-steps 0), text encoders and "
                   "transformer are trained on from there instead of from random (a run continued on another call)")
    p.add_argument("--probe", action="store_true", help="time 120 steps of each stage and the drawing of scenes, print the rates, save nothing")
    args = p.parse_args()

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    # flash attention where there is no mask (the VAE, the transformer), the math kernel where there
    # is (CLIP's causal mask): on an H100 with torch 2.11 the cuDNN kernel's backward fails on this
    # transformer's heads of 40 ("mha_graph.execute ... is_good()"), and the deterministic flag would
    # make the memory-efficient one's backward non-deterministic anyway
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    caught = warnings.catch_warnings(record=True)
    seen = caught.__enter__()
    warnings.simplefilter("always")

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="shapes-flux-tokenizers-"))
    unpack_tokenizer("clip", tmp)
    unpack_tokenizer("t5", tmp)
    # the pipeline's tokenizers (CLIPTokenizer, as model_index.json names it) and, for the training
    # batches, CLIP's fast tokenizer read from the same files (the same ids, 30x faster)
    tokenizers = (CLIPTokenizer.from_pretrained(tmp / "clip"), T5TokenizerFast.from_pretrained(tmp / "t5"))
    fast = (CLIPTokenizerFast.from_pretrained(tmp / "clip"), tokenizers[1])

    log = {
        "seed": args.seed, "args": vars(args), "seconds": {}, "losses": [],
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "diffusers": diffusers.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__,
                     "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor() or "cpu"},
    }
    vae, clip, t5, transformer, scheduler = components(args.seed)
    if args.init:
        # the earlier run's weights (bf16 as saved, trained on in float32) and its log, kept in this one's
        init = pathlib.Path(args.init)
        vae = AutoencoderKL.from_pretrained(init / "vae", torch_dtype=torch.float32)
        clip = CLIPTextModel.from_pretrained(init / "text_encoder", torch_dtype=torch.float32)
        t5 = T5EncoderModel.from_pretrained(init / "text_encoder_2", torch_dtype=torch.float32)
        transformer = FluxTransformer2DModel.from_pretrained(init / "transformer", torch_dtype=torch.float32)
        earlier = json.loads((init / "train_log.json").read_text())
        log["init"] = {k: earlier[k] for k in ("seed", "args", "seconds", "versions", "evaluation", "init") if k in earlier}
    log["parameters"] = {n: sum(p.numel() for p in m.parameters()) for n, m in
                         (("vae", vae), ("text_encoder", clip), ("text_encoder_2", t5), ("transformer", transformer))}
    print(json.dumps({"parameters": log["parameters"]}), flush=True)
    begin = time.time()
    if args.probe:
        probe(vae, clip, t5, transformer, args, fast, log)
        return

    if args.vae_steps > 0:
        train_vae(vae, args, log)
    elif not args.init:
        raise SystemExit("--vae-steps 0 needs --init: an untrained VAE has nothing to encode with")

    train_flow(vae, clip, t5, transformer, args, fast, log)
    pipe = FluxPipeline(scheduler=scheduler, vae=vae, text_encoder=clip, tokenizer=tokenizers[0],
                        text_encoder_2=t5, tokenizer_2=tokenizers[1], transformer=transformer)
    save(pipe, args.out)
    log["seconds"]["training"] = round(time.time() - begin, 1)

    # evaluated as shipped: the bf16 weights read back, run in float32
    shipped = FluxPipeline.from_pretrained(args.out, tokenizer=tokenizers[0], tokenizer_2=tokenizers[1], torch_dtype=torch.float32)
    shipped.set_progress_bar_config(disable=True)
    log["evaluation"] = [evaluate(shipped, args, args.eval, args.eval_steps, cfg, tokens)
                         for tokens in (SHORT_TOKENS, T5_TOKENS) for cfg in (1.0, 4.0)]
    for e in log["evaluation"]:
        print(json.dumps({k: v for k, v in e.items() if k != "failures"}), flush=True)
    caught.__exit__(None, None, None)
    log["warnings"] = sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in seen})
    (pathlib.Path(args.out) / "train_log.json").write_text(json.dumps(log, indent=1) + "\n")


if __name__ == "__main__":
    main()
