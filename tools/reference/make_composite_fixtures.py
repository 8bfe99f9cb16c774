"""PyTorch references for the composite ops, as a committed .safetensors fixture.

Run from the repository root with the setup's Python (it needs `safetensors`):
    .venv/bin/pip install safetensors numpy && .venv/bin/python tools/reference/make_composite_fixtures.py
Writes tests/fixtures/composite_ops.safetensors: for each case "<name>.in<i>" inputs and
"<name>.out", and in the metadata "<name>" -> a JSON object {op, attrs}.
Cases: gelu tanh, rms norm, group norm, conv2d with padding and groups, bilinear interpolate,
sdpa with a mask and causal, apply_rotary_emb (diffusers' formula, both pairings; float32, and
bfloat16 through a transposed view and over [B, S, H, D] with sequence_dim 1).
"""
import json
import pathlib

import torch

from diffusers_reference import apply_rotary_emb
from safetensors.torch import save_file

F = torch.nn.functional


def main():
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    x = r(2, 3, 16)
    img = r(2, 4, 7, 6)
    q, k, v = r(2, 3, 9, 8), r(2, 3, 9, 8), r(2, 3, 9, 8)
    mask = torch.rand(9, 9, generator=g) > 0.25
    mask |= torch.eye(9, dtype=torch.bool)
    rx, cos, sin = r(1, 2, 5, 8), r(5, 8), r(5, 8)
    w_gn, b_gn = r(4), r(4)
    w_conv, b_conv = r(6, 2, 3, 3), r(6)
    w_rms = r(16)
    xb = x.to(torch.bfloat16)
    rxt, cos16, sin16 = r(2, 5, 3, 16).to(torch.bfloat16), r(5, 16), r(5, 16)
    cases = {
        "gelu_tanh": ("gelu", [x], F.gelu(x, approximate="tanh"), {"approximate": "tanh"}),
        "rms_norm": ("rmsNorm", [x, w_rms], F.rms_norm(x, (16,), w_rms, eps=1e-6), {"shape": [16], "eps": 1e-6}),
        "rms_norm_bf16": ("rmsNorm", [xb, w_rms.to(torch.bfloat16)], F.rms_norm(xb, (16,), w_rms.to(torch.bfloat16), eps=1e-6), {"shape": [16], "eps": 1e-6}),
        "group_norm": ("groupNorm", [img, w_gn, b_gn], F.group_norm(img, 2, w_gn, b_gn, 1e-5), {"groups": 2, "eps": 1e-5}),
        "conv2d": ("conv2d", [img, w_conv, b_conv], F.conv2d(img, w_conv, b_conv, padding=1, groups=2), {"padding": [1, 1], "groups": 2}),
        "interpolate_bilinear": ("interpolate", [img], F.interpolate(img, size=(11, 9), mode="bilinear"), {"size": [11, 9], "mode": "bilinear"}),
        "sdpa_mask": ("sdpa", [q, k, v, mask], F.scaled_dot_product_attention(q, k, v, attn_mask=mask), {}),
        "sdpa_causal": ("sdpa", [q, k, v], F.scaled_dot_product_attention(q, k, v, is_causal=True), {"causal": True}),
        "rotary_pairs": ("rotary", [rx, cos, sin], apply_rotary_emb(rx, cos, sin, -1), {"unbind": -1}),
        "rotary_halves": ("rotary", [rx, cos, sin], apply_rotary_emb(rx, cos, sin, -2), {"unbind": -2}),
        # bfloat16 through a transposed view ([B, S, H, D] stored, [B, H, S, D] rotated), as Flux
        # rotates its projections: D 16 is two 16-byte loads per row on GPUs, the halves one each
        "rotary_pairs_bf16_transposed": ("rotary", [rxt, cos16, sin16], apply_rotary_emb(rxt.transpose(1, 2), cos16, sin16, -1), {"unbind": -1, "transpose": True}),
        "rotary_halves_bf16_transposed": ("rotary", [rxt, cos16, sin16], apply_rotary_emb(rxt.transpose(1, 2), cos16, sin16, -2), {"unbind": -2, "transpose": True}),
        # the same [B, S, H, D] rotated where it lies (diffusers' sequence_dim=1, as Flux calls it)
        "rotary_pairs_bf16_seq1": ("rotary", [rxt, cos16, sin16], apply_rotary_emb(rxt, cos16, sin16, -1, 1), {"unbind": -1, "sequenceDim": 1}),
        "rotary_halves_bf16_seq1": ("rotary", [rxt, cos16, sin16], apply_rotary_emb(rxt, cos16, sin16, -2, 1), {"unbind": -2, "sequenceDim": 1}),
        "rotary_pairs_seq1": ("rotary", [rxt.float(), cos16, sin16], apply_rotary_emb(rxt.float(), cos16, sin16, -1, 1), {"unbind": -1, "sequenceDim": 1}),
    }
    tensors, metadata = {}, {}
    for name, (op, inputs, out, attrs) in cases.items():
        for i, t in enumerate(inputs):
            tensors[f"{name}.in{i}"] = t.clone().contiguous()
        tensors[f"{name}.out"] = out.contiguous()
        metadata[name] = json.dumps({"op": op, "attrs": attrs, "inputs": len(inputs)})
    metadata["torch"] = torch.__version__
    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "composite_ops.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    print(f"wrote {path} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
