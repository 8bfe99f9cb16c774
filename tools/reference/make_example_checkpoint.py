"""The checkpoint examples/nn-checkpoint.mjs loads: a small PyTorch MLP and what PyTorch computes.

Run from the repository root with the setup's Python (it needs `safetensors`):
    .venv/bin/python tools/reference/make_example_checkpoint.py
Writes examples/assets/:
  mlp.safetensors   MLP's state dict (fc1.weight [16, 8], fc1.bias, fc2.weight [3, 16], fc2.bias)
  mlp-io.json       an input batch [4, 8] and PyTorch's output [4, 3] for it
"""
import json
import pathlib

import torch
from torch import nn
from safetensors.torch import save_file


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def main():
    out = pathlib.Path("examples/assets")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = MLP().eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out / "mlp.safetensors")
    # the input as the JSON file holds it (7 decimals), so PyTorch's output is for exactly that
    x = torch.tensor([[round(v, 7) for v in row] for row in torch.randn(4, 8).tolist()])
    with torch.no_grad():
        y = model(x)
    io = {"input": x.tolist(), "output": y.tolist()}
    (out / "mlp-io.json").write_text(json.dumps(io, indent=1) + "\n")
    print(f"wrote {out}/mlp.safetensors and mlp-io.json")


if __name__ == "__main__":
    main()
