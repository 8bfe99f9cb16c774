"""transformers references for @dtorch/hf's text encoders: tiny T5 and CLIP models.

Run from the repository root with the setup's Python (transformers, safetensors):
    .venv/bin/python tools/reference/make_hf_model_fixtures.py
Writes tests/fixtures/hf/models/<name>/, each a folder as save_pretrained writes it
(config.json, model.safetensors or a 2-shard model.safetensors.index.json), plus io.safetensors
beside the folders with the inputs and transformers' outputs:
  t5-v1_0        T5EncoderModel, feed_forward_proj "relu"
  t5-v1_1        T5EncoderModel, "gated-gelu" (T5 v1.1, as SD3's and Flux's text_encoder_2), 2 shards
  clip           CLIPTextModel, quick_gelu, the legacy eos_token_id 2 (pooled at argmax of the ids)
  clip-projection CLIPTextModelWithProjection, gelu, eos_token_id 99 (pooled at the first eos)
io.safetensors, for each <name>: "<name>.input_ids", "<name>.attention_mask" (int64) and
  "<name>.last_hidden_state" (no mask), "<name>.masked.last_hidden_state" (with the mask),
  "<name>.bf16.last_hidden_state" (weights and compute in bfloat16, with the mask),
  T5: "<name>.fp16.last_hidden_state" (loaded as float16 by from_pretrained: `wo` stays float32),
  CLIP: "<name>.pooler_output" / "<name>.text_embeds", "<name>.hidden_states.<i>" (with the mask);
  "<name>.eos_padded.input_ids" (the same rows padded with the end-of-text token, as SD3's CLIP
  tokenizer pads: several end-of-text tokens a row, the pooled output at the first) and its
  "<name>.eos_padded.last_hidden_state", "<name>.eos_padded.pooler_output" / ".text_embeds"
  (no mask, as SD3's pipeline runs its CLIPs).
Everything in float32 unless named bf16 (stored as float32). Weights are transformers' own
initialisation from a fixed seed, scaled up where they are tiny so that every layer matters.
t5_relative_position_buckets.json: transformers' T5Attention._relative_position_bucket at T5's real
settings (32 buckets, max distance 128, the config defaults) for every relative position (memory
minus query) from -300 to 300, bidirectional (the encoder's) and not: {"settings", "positions",
"bidirectional", "unidirectional"}, where the tiny models' 8 buckets over 14 tokens cannot tell a
wrong max distance.
"""
import json
import pathlib
import shutil

import torch
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel
from transformers.models.t5.modeling_t5 import T5Attention
from fixture_weights import perturb

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "models"

BATCH, SEQ = 3, 14  # SEQ > relative_attention_max_distance / 2 so that log-spaced buckets appear


def inputs(vocab, eos, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab - 2, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.int64)
    # row 0 full length; rows 1 and 2 end early and are padded (pad id 0), as a tokenizer pads
    for row, length in ((0, SEQ), (1, 9), (2, 5)):
        ids[row, length - 1] = eos
        ids[row, length:] = 0
        mask[row, length:] = 0
    return ids, mask


def save(model, name, shards=1):
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    if shards == 1:
        model.save_pretrained(folder)
    else:
        total = sum(p.numel() * p.element_size() for p in model.state_dict().values())
        model.save_pretrained(folder, max_shard_size=int(total * 0.6))
        assert len(list(folder.glob("*.safetensors"))) == shards, list(folder.iterdir())




def run_t5(name, feed_forward_proj, shards, seed, io):
    config = T5Config(
        vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_heads=4,
        relative_attention_num_buckets=8, relative_attention_max_distance=20,
        feed_forward_proj=feed_forward_proj, dropout_rate=0.0, dtype="float32",
    )
    torch.manual_seed(seed)
    model = T5EncoderModel(config).eval()
    perturb(model, seed)
    save(model, name, shards)
    ids, mask = inputs(config.vocab_size, config.eos_token_id, seed)
    with torch.no_grad():
        io[f"{name}.input_ids"] = ids
        io[f"{name}.attention_mask"] = mask
        io[f"{name}.last_hidden_state"] = model(input_ids=ids).last_hidden_state
        io[f"{name}.masked.last_hidden_state"] = model(input_ids=ids, attention_mask=mask).last_hidden_state
        bf16 = model.to(torch.bfloat16)
        io[f"{name}.bf16.last_hidden_state"] = bf16(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        # float16 through from_pretrained, which keeps `wo` in float32 (_keep_in_fp32_modules)
        fp16 = T5EncoderModel.from_pretrained(out / name, dtype=torch.float16).eval()
        assert fp16.encoder.block[0].layer[1].DenseReluDense.wo.weight.dtype == torch.float32
        io[f"{name}.fp16.last_hidden_state"] = fp16(input_ids=ids, attention_mask=mask).last_hidden_state.float()


def run_clip(name, cls, hidden_act, eos, seed, io):
    config = CLIPTextConfig(
        vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=20, hidden_act=hidden_act, projection_dim=24, eos_token_id=eos,
        bos_token_id=1, pad_token_id=0, dtype="float32",
    )
    torch.manual_seed(seed)
    model = cls(config).eval()
    perturb(model, seed)
    save(model, name)
    ids, mask = inputs(config.vocab_size, eos, seed)
    if eos == 2:
        # the legacy rule pools at the largest id: make the end-of-text token the largest, as CLIP's is
        ids[ids == 2] = config.vocab_size - 1
        ids[torch.arange(BATCH), mask.sum(1) - 1] = config.vocab_size - 1
    pooled = "text_embeds" if cls is CLIPTextModelWithProjection else "pooler_output"
    with torch.no_grad():
        io[f"{name}.input_ids"] = ids
        io[f"{name}.attention_mask"] = mask
        plain = model(input_ids=ids)
        io[f"{name}.last_hidden_state"] = plain.last_hidden_state
        io[f"{name}.{pooled}"] = getattr(plain, pooled)
        masked = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        io[f"{name}.masked.last_hidden_state"] = masked.last_hidden_state
        io[f"{name}.masked.{pooled}"] = getattr(masked, pooled)
        for i, h in enumerate(masked.hidden_states):
            io[f"{name}.hidden_states.{i}"] = h
        # rows padded with their end-of-text token (the legacy rule's largest id, which it is)
        padded = torch.where(mask.bool(), ids, ids[torch.arange(BATCH), mask.sum(1) - 1][:, None])
        assert ((padded == padded[0, -1]).sum(1) > 1).any(), "some row holds several end-of-text tokens"
        eos_padded = model(input_ids=padded)
        io[f"{name}.eos_padded.input_ids"] = padded
        io[f"{name}.eos_padded.last_hidden_state"] = eos_padded.last_hidden_state
        io[f"{name}.eos_padded.{pooled}"] = getattr(eos_padded, pooled)
        bf16 = model.to(torch.bfloat16)
        io[f"{name}.bf16.last_hidden_state"] = bf16(input_ids=ids, attention_mask=mask).last_hidden_state.float()


def t5_buckets():
    settings = dict(num_buckets=32, max_distance=128)
    positions = torch.arange(-300, 301)
    bucket = lambda bidirectional: T5Attention._relative_position_bucket(positions, bidirectional=bidirectional, **settings).tolist()  # noqa: E731
    buckets = {"settings": settings, "positions": positions.tolist(), "bidirectional": bucket(True), "unidirectional": bucket(False)}
    (out / "t5_relative_position_buckets.json").write_text(json.dumps(buckets, separators=(",", ":")) + "\n")


def main():
    out.mkdir(parents=True, exist_ok=True)
    t5_buckets()
    io = {}
    run_t5("t5-v1_0", "relu", 1, 1, io)
    run_t5("t5-v1_1", "gated-gelu", 2, 2, io)
    run_clip("clip", CLIPTextModel, "quick_gelu", 2, 3, io)
    run_clip("clip-projection", CLIPTextModelWithProjection, "gelu", 99, 4, io)
    save_file({k: v.contiguous() for k, v in io.items()}, str(out / "io.safetensors"))
    for f in sorted(out.rglob("*")):
        if f.is_file():
            print(f.relative_to(root), f.stat().st_size)


if __name__ == "__main__":
    main()
