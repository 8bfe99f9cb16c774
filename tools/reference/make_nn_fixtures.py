"""PyTorch references for @dtorch/nn: modules whose state dicts the nn tests load.

Run from the repository root with the setup's Python (it needs `safetensors`):
    .venv/bin/python tools/reference/make_nn_fixtures.py
Writes tests/fixtures/nn/:
  mlp.safetensors        state dict of MLP (Sequential of Linear, GELU, Linear; LayerNorm)
  attention.safetensors  state dict of Transformer (Embedding, blocks of diffusers-style
                         attention with to_q/to_k/to_v/to_out.0 and a feed-forward, RMSNorm)
  conv.safetensors       state dict of ConvBlock (Conv2d, GroupNorm, SiLU, Conv2d)
  sharded/model.safetensors.index.json + two shards: Transformer's state dict split as
                         transformers' save_pretrained splits checkpoints (weight_map)
  io.safetensors         inputs "<model>.in" and PyTorch's outputs "<model>.out"; "f16.weight" and
                         "f16.bias": f16.safetensors' values widened to float32 by PyTorch
  f16.safetensors        state dict of a float16 Linear(8, 2) holding what a float16 reader or
                         writer gets wrong: zeros of both signs, subnormals (the smallest, the
                         largest), the smallest normal, values at and near 65504, infinities
Key names are PyTorch's state-dict keys; the TypeScript modules in tests/nn mirror these classes.
"""
import json
import pathlib

import torch
from torch import nn
from safetensors.torch import save_file

F = nn.functional


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
        self.norm = nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.layers(x))


class Attention(nn.Module):
    """diffusers-style self-attention: to_q/to_k/to_v, to_out = [Linear, Dropout]."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim), nn.Dropout(0.0)])

    def forward(self, x):
        b, s, d = x.shape
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.to_q(x)), split(self.to_k(x)), split(self.to_v(x))
        o = F.scaled_dot_product_attention(q, k, v)
        o = o.transpose(1, 2).reshape(b, s, d)
        return self.to_out[1](self.to_out[0](o))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.proj_in = nn.Linear(dim, hidden)
        self.act = nn.SiLU()
        self.proj_out = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.proj_out(self.act(self.proj_in(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, vocab=50, dim=32, heads=4, depth=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.transformer_blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm_out = nn.RMSNorm(dim, eps=1e-6)
        self.proj_out = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.transformer_blocks:
            x = block(x)
        return self.proj_out(self.norm_out(x))


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_in = nn.Conv2d(4, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.act = nn.SiLU()
        self.conv_out = nn.Conv2d(8, 4, 3, stride=2, padding=1, groups=2)

    def forward(self, x):
        return self.conv_out(self.act(self.norm(self.conv_in(x))))


def randomize(module, g):
    # default inits leave norms at 1/0: draw every parameter so that each one matters
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


def float16_linear():
    linear = nn.Linear(8, 2, dtype=torch.float16)
    tiny = 2.0**-24  # the smallest subnormal
    weight = [
        [0.0, -0.0, tiny, -tiny, 3 * tiny, 1023 * tiny, 2.0**-14, -(2.0**-14)],
        [65504.0, -65504.0, 65472.0, 32784.0, 1 / 3, -2.5, float("inf"), float("-inf")],
    ]
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight))
        linear.bias.copy_(torch.tensor([0.1, -1000.5]))
    return linear


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(6)
    root = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "nn"
    (root / "sharded").mkdir(parents=True, exist_ok=True)
    meta = {"torch": torch.__version__}
    mlp, transformer, conv = MLP().eval(), Transformer().eval(), ConvBlock().eval()
    for m in (mlp, transformer, conv):
        randomize(m, g)
    io = {
        "mlp.in": torch.randn(4, 3, 16, generator=g),
        "attention.in": torch.randint(0, 50, (2, 6), generator=g),
        "conv.in": torch.randn(2, 4, 6, 6, generator=g),
    }
    with torch.no_grad():
        io["mlp.out"] = mlp(io["mlp.in"])
        io["attention.out"] = transformer(io["attention.in"])
        io["conv.out"] = conv(io["conv.in"])
    for name, m in (("mlp", mlp), ("attention", transformer), ("conv", conv)):
        save_file({k: v.contiguous() for k, v in m.state_dict().items()}, str(root / f"{name}.safetensors"), metadata=meta)
    f16 = float16_linear()
    io.update({f"f16.{k}": v.float() for k, v in f16.state_dict().items()})
    save_file({k: v.contiguous() for k, v in f16.state_dict().items()}, str(root / "f16.safetensors"), metadata=meta)
    save_file(io, str(root / "io.safetensors"), metadata=meta)

    # a sharded checkpoint: the blocks in one file, everything else in the other
    state = transformer.state_dict()
    shards = {"model-00001-of-00002.safetensors": {}, "model-00002-of-00002.safetensors": {}}
    for k, v in state.items():
        shards["model-00001-of-00002.safetensors" if k.startswith("transformer_blocks.") else "model-00002-of-00002.safetensors"][k] = v.contiguous()
    weight_map = {}
    for file, tensors in shards.items():
        save_file(tensors, str(root / "sharded" / file), metadata={"format": "pt"})
        weight_map.update({k: file for k in tensors})
    total = sum(v.numel() * v.element_size() for v in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (root / "sharded" / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"wrote {root}")


if __name__ == "__main__":
    main()
