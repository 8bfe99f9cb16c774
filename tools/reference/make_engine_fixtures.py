"""Reference values for the engine slice's op tests, computed with PyTorch.

Run from the repository root with the setup's Python (`.venv/bin/python`):
    .venv/bin/python tools/reference/make_engine_fixtures.py
Writes tests/fixtures/engine_ops.json (committed; tests never need Python).
Each case: the DTorch call that tests/conformance/fixture_cases.ts makes (a function or method and its
arguments), its inputs (values, dtype), and PyTorch's output values and dtype.
"""
import json
import math
import pathlib

import torch

from diffusers_reference import apply_rotary_emb

DTYPE_NAMES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
    torch.bool: "bool",
}


def enc(t):
    values = t.detach().to(torch.float64 if t.dtype.is_floating_point else torch.int64).flatten().tolist()
    if t.dtype == torch.bool:
        values = [bool(v) for v in values]
    else:  # JSON has no NaN or infinity: they travel as strings
        values = [v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")) for v in values]
    return {"shape": list(t.shape), "dtype": DTYPE_NAMES[t.dtype], "values": values}


def T(k):
    """Input k of the case (a tensor, or a scalar input) as an argument of the call."""
    return {"input": k}


def case(name, call, inputs, out, *args, pick=None):
    """PyTorch's `out` for DTorch's `call` with `args`: call is "name" (dt.name), "F.name"
    (dt.F.name) or ".name" (a method of the first argument); args are JSON values, with T(k) for
    input k and {"slice": [start, end, step]} for dt.slice(...); `pick` takes that key or index of
    the result ({ values, indices }, a split's pieces)."""
    c = {"name": name, "call": call, "args": list(args),
         "inputs": [enc(i) if isinstance(i, torch.Tensor) else {"scalar": i} for i in inputs], "expected": enc(out)}
    if pick is not None:
        c["pick"] = pick
    return c


def assigned(t, index, value):
    out = t.clone()
    out[index] = value
    return out


def nn_cases(g):
    F = torch.nn.functional
    x = torch.randn(2, 3, 8, generator=g)
    w = torch.randn(5, 8, generator=g)
    b = torch.randn(5, generator=g)
    gamma, beta = torch.randn(8, generator=g), torch.randn(8, generator=g)
    img = torch.randn(2, 6, 3, 3, generator=g)
    gw, gb = torch.randn(6, generator=g), torch.randn(6, generator=g)
    ids = torch.tensor([[0, 4, 2], [3, 3, 1]])
    table = torch.randn(5, 4, generator=g)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
    bool_mask = torch.rand(5, 5, generator=g) > 0.3
    float_mask = torch.randn(2, 1, 5, 5, generator=g)
    rx = torch.randn(1, 2, 3, 8, generator=g)
    cos, sin = torch.randn(3, 8, generator=g), torch.randn(3, 8, generator=g)
    return [
        case("linear", "F.linear", [x, w, b], F.linear(x, w, b), T(0), T(1), T(2)),
        case("linear no bias", "F.linear", [x, w], F.linear(x, w), T(0), T(1)),
        case("layer_norm affine", "F.layerNorm", [x, gamma, beta], F.layer_norm(x, (8,), gamma, beta, 1e-5), T(0), [8], {"weight": T(1), "bias": T(2), "eps": 1e-5}),
        case("layer_norm plain", "F.layerNorm", [x], F.layer_norm(x, (8,), eps=1e-6), T(0), [8], {"eps": 1e-6}),
        case("rms_norm", "F.rmsNorm", [x, gamma], F.rms_norm(x, (8,), gamma, eps=1e-6), T(0), [8], {"weight": T(1), "eps": 1e-6}),
        case("rms_norm default eps", "F.rmsNorm", [x], F.rms_norm(x, (8,)), T(0), [8], {}),
        case("group_norm", "F.groupNorm", [img, gw, gb], F.group_norm(img, 3, gw, gb, 1e-5), T(0), 3, {"weight": T(1), "bias": T(2), "eps": 1e-5}),
        case("embedding", "F.embedding", [ids, table], F.embedding(ids, table), T(0), T(1)),
        case("sdpa", "F.scaledDotProductAttention", [q, k, v], F.scaled_dot_product_attention(q, k, v), T(0), T(1), T(2)),
        case("sdpa causal", "F.scaledDotProductAttention", [q, k, v], F.scaled_dot_product_attention(q, k, v, is_causal=True), T(0), T(1), T(2), {"isCausal": True}),
        case("sdpa bool mask scale", "F.scaledDotProductAttention", [q, k, v, bool_mask], F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask, scale=0.3), T(0), T(1), T(2), {"attnMask": T(3), "scale": 0.3}),
        case("sdpa float mask", "F.scaledDotProductAttention", [q, k, v, float_mask], F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask), T(0), T(1), T(2), {"attnMask": T(3)}),
        case("apply_rotary_emb pairs", "F.applyRotaryEmb", [rx, cos, sin], apply_rotary_emb(rx, cos, sin, -1), T(0), [T(1), T(2)], {"useRealUnbindDim": -1}),
        case("apply_rotary_emb halves", "F.applyRotaryEmb", [rx, cos, sin], apply_rotary_emb(rx, cos, sin, -2), T(0), [T(1), T(2)], {"useRealUnbindDim": -2}),
        case("outer", "outer", [gamma, b], torch.outer(gamma, b), T(0), T(1)),
        case("einsum permute", "einsum", [q], torch.einsum("bhsd->bshd", q), "bhsd->bshd", T(0)),
        *image_cases(g),
        *packed_heads_cases(),
    ]


def packed_heads_cases():
    """sdpa with heads packed in the last dim ([B, L, heads*E]), against torch's sdpa over the
    [B, heads, L, E] views; its own generator, so the cases before keep their values."""
    F = torch.nn.functional
    g = torch.Generator().manual_seed(11)
    heads = 3
    q, k = torch.randn(2, 5, heads * 4, generator=g), torch.randn(2, 6, heads * 4, generator=g)
    v = torch.randn(2, 6, heads * 2, generator=g)
    bool_mask = torch.rand(2, 1, 5, 6, generator=g) > 0.3
    float_mask = torch.randn(heads, 5, 6, generator=g)
    split = lambda t: t.unflatten(-1, (heads, -1)).transpose(-3, -2)
    join = lambda t: t.transpose(-3, -2).flatten(-2)
    sdpa = lambda q, k, v, **kw: join(F.scaled_dot_product_attention(split(q), split(k), split(v), **kw))
    return [
        case("sdpa heads", "F.scaledDotProductAttention", [q, k, v], sdpa(q, k, v), T(0), T(1), T(2), {"heads": heads}),
        case("sdpa heads causal", "F.scaledDotProductAttention", [q, k[:, :5], v[:, :5]], sdpa(q, k[:, :5], v[:, :5], is_causal=True), T(0), T(1), T(2), {"isCausal": True, "heads": heads}),
        case("sdpa heads bool mask scale", "F.scaledDotProductAttention", [q, k, v, bool_mask], sdpa(q, k, v, attn_mask=bool_mask, scale=0.3), T(0), T(1), T(2), {"attnMask": T(3), "scale": 0.3, "heads": heads}),
        case("sdpa heads float mask per head", "F.scaledDotProductAttention", [q, k, v, float_mask], sdpa(q, k, v, attn_mask=float_mask), T(0), T(1), T(2), {"attnMask": T(3), "heads": heads}),
    ]


def image_cases(g):
    F = torch.nn.functional
    x = torch.randn(2, 4, 6, 5, generator=g)
    w = torch.randn(6, 2, 3, 3, generator=g)
    b = torch.randn(6, generator=g)
    w1 = torch.randn(3, 4, 1, 1, generator=g)
    return [
        case("conv2d padding groups", "F.conv2d", [x, w, b], F.conv2d(x, w, b, padding=1, groups=2), T(0), T(1), T(2), {"padding": [1, 1], "groups": 2}),
        case("conv2d stride dilation", "F.conv2d", [x, w[:, :, :, :]], F.conv2d(x, w, stride=2, dilation=[1, 2], groups=2), T(0), T(1), None, {"stride": [2, 2], "dilation": [1, 2], "groups": 2}),
        case("conv2d 1x1 same", "F.conv2d", [x, w1], F.conv2d(x, w1, padding="same"), T(0), T(1), None, {"padding": "same"}),
        case("interpolate nearest 2x", "F.interpolate", [x], F.interpolate(x, scale_factor=2.0, mode="nearest"), T(0), {"scaleFactor": 2.0, "mode": "nearest"}),
        case("interpolate nearest size", "F.interpolate", [x], F.interpolate(x, size=(4, 7), mode="nearest"), T(0), {"size": [4, 7], "mode": "nearest"}),
        case("interpolate bilinear", "F.interpolate", [x], F.interpolate(x, size=(9, 8), mode="bilinear"), T(0), {"size": [9, 8], "mode": "bilinear"}),
        case("interpolate bilinear corners", "F.interpolate", [x], F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True), T(0), {"scaleFactor": 1.5, "mode": "bilinear", "alignCorners": True}),
        case("avg_pool2d", "F.avgPool2d", [x], F.avg_pool2d(x, 2), T(0), 2, {}),
        case("avg_pool2d stride padding", "F.avgPool2d", [x], F.avg_pool2d(x, 3, stride=2, padding=1), T(0), 3, {"stride": [2, 2], "padding": [1, 1]}),
        case("max_pool2d", "F.maxPool2d", [x], F.max_pool2d(x, (2, 3), stride=1), T(0), [2, 3], {"stride": [1, 1]}),
    ]


def main():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(3, 4, generator=g)
    b = torch.randn(4, 5, generator=g)
    row = torch.randn(4, generator=g)
    batch = torch.randn(2, 3, 4, generator=g)
    ints = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int32)
    wide = torch.linspace(-4, 4, 64)
    cases = [
        case("add broadcast row", "add", [a, row], a + row, T(0), T(1)),
        case("add alpha", "add", [a, a], torch.add(a, a, alpha=2.5), T(0), T(1), {"alpha": 2.5}),
        case("sub alpha", "sub", [a, row], torch.sub(a, row, alpha=0.5), T(0), T(1), {"alpha": 0.5}),
        case("mul", "mul", [a, row], a * row, T(0), T(1)),
        case("div", "div", [a, row], a / row, T(0), T(1)),
        case("add scalar int to int32", "add", [ints, 3], ints + 3, T(0), T(1)),
        case("add scalar float to int32", "add", [ints, 0.5], ints + 0.5, T(0), T(1)),
        case("mul scalar float", "mul", [a, -1.5], a * -1.5, T(0), T(1)),
        case("div int by int", "div", [ints, torch.tensor([2, 4, 8], dtype=torch.int32)], ints / torch.tensor([2, 4, 8], dtype=torch.int32), T(0), T(1)),
        case("sub scalar from tensor", "sub", [a, 2], a - 2, T(0), T(1)),
        # float16 and bfloat16 times a scalar compute with the scalar in float32 on both devices:
        # a scalar rounded to the tensor's dtype first gives other values for a third of these
        # (PyTorch's CPU add rounds it, its GPU add does not: no add case can hold for both)
        case("mul scalar float16", "mul", [wide.half(), 0.1], wide.half() * 0.1, T(0), T(1)),
        case("div scalar float16", "div", [wide.half(), 3.3], wide.half() / 3.3, T(0), T(1)),
        case("mul scalar bfloat16", "mul", [wide.bfloat16(), 0.1], wide.bfloat16() * 0.1, T(0), T(1)),
        case("neg", "neg", [a], -a, T(0)),
        case("relu", "relu", [a], torch.relu(a), T(0)),
        case("abs int", "abs", [ints], ints.abs(), T(0)),
        case("exp of int", "exp", [ints], torch.exp(ints), T(0)),
        case("sigmoid", "sigmoid", [a], torch.sigmoid(a), T(0)),
        case("tanh", "tanh", [a], torch.tanh(a), T(0)),
        case("matmul 2d", ".matmul", [a, b], a @ b, T(0), T(1)),
        case("matmul batched broadcast", ".matmul", [batch, b], batch @ b, T(0), T(1)),
        case("matmul vector", ".matmul", [a, row], a @ row, T(0), T(1)),
        case("matmul vector-matrix", ".matmul", [row, b], row @ b, T(0), T(1)),
        case("sum all", ".sum", [a], a.sum(), T(0)),
        case("sum dim keepdim", ".sum", [batch], batch.sum(dim=1, keepdim=True), T(0), [1], True),
        case("sum negative dims", ".sum", [batch], batch.sum(dim=(-1, 0)), T(0), [-1, 0], False),
        case("sum int32 gives int64", ".sum", [ints], ints.sum(), T(0)),
        case("to int32 truncates", ".to", [a * 3], (a * 3).to(torch.int32), T(0), "int32"),
        case("to bfloat16", ".to", [a], a.to(torch.bfloat16), T(0), "bfloat16"),
        case("to float16", ".to", [a], a.to(torch.float16), T(0), "float16"),
        # elementwise library
        case("square", "square", [a], a.square(), T(0)),
        case("floor", "floor", [a * 3], (a * 3).floor(), T(0)),
        case("round half even", "round", [torch.tensor([0.5, 1.5, 2.5, -0.5, 2.4])], torch.tensor([0.5, 1.5, 2.5, -0.5, 2.4]).round(), T(0)),
        case("log2", "log2", [a.abs() + 0.1], (a.abs() + 0.1).log2(), T(0)),
        case("rsqrt", "rsqrt", [a.abs() + 0.1], (a.abs() + 0.1).rsqrt(), T(0)),
        case("reciprocal", "reciprocal", [a], a.reciprocal(), T(0)),
        case("sin", "sin", [a], a.sin(), T(0)),
        case("cos", "cos", [a], a.cos(), T(0)),
        case("silu", "silu", [a], torch.nn.functional.silu(a), T(0)),
        case("quick_gelu", "quickGelu", [a], a * torch.sigmoid(1.702 * a), T(0)),
        case("gelu", "F.gelu", [a], torch.nn.functional.gelu(a), T(0), {"approximate": "none"}),
        case("gelu tanh", "F.gelu", [a], torch.nn.functional.gelu(a, approximate="tanh"), T(0), {"approximate": "tanh"}),
        case("isnan", "isnan", [torch.tensor([1.0, float("nan"), float("inf")])], torch.tensor([1.0, float("nan"), float("inf")]).isnan(), T(0)),
        case("isinf", "isinf", [torch.tensor([1.0, float("nan"), float("-inf")])], torch.tensor([1.0, float("nan"), float("-inf")]).isinf(), T(0)),
        case("clamp both", "clamp", [a], a.clamp(-0.5, 0.5), T(0), -0.5, 0.5),
        case("clamp min only int", "clamp", [ints], ints.clamp(min=0), T(0), 0),
        case("pow tensor", "pow", [a.abs(), row], a.abs().pow(row), T(0), T(1)),
        case("pow scalar int", "pow", [ints, 2], ints.pow(2), T(0), T(1)),
        case("pow float scalar on int", "pow", [ints, 0.5], ints.pow(0.5), T(0), T(1)),
        case("minimum", "minimum", [a, row], torch.minimum(a, row), T(0), T(1)),
        case("maximum int", "maximum", [ints, torch.tensor([0, 0, 0], dtype=torch.int32)], torch.maximum(ints, torch.tensor([0, 0, 0], dtype=torch.int32)), T(0), T(1)),
        case("eq", "eq", [ints, torch.tensor([1, 5, -6], dtype=torch.int32)], ints == torch.tensor([1, 5, -6], dtype=torch.int32), T(0), T(1)),
        case("lt scalar", "lt", [a, 0.25], a < 0.25, T(0), T(1)),
        case("ge scalar int on float", "ge", [a, 0], a >= 0, T(0), T(1)),
        case("ne", "ne", [a, a.round()], a != a.round(), T(0), T(1)),
        case("logical_and", "logicalAnd", [a > 0, row > 0], torch.logical_and(a > 0, row > 0), T(0), T(1)),
        case("logical_or scalar", "logicalOr", [a > 0, False], torch.logical_or(a > 0, torch.tensor(False)), T(0), T(1)),
        case("logical_not", "logicalNot", [a > 0], torch.logical_not(a > 0), T(0)),
        case("where", "where", [a > 0, a, row], torch.where(a > 0, a, row), T(0), T(1), T(2)),
        case("where scalar branch", "where", [a > 0, a, 0.0], torch.where(a > 0, a, 0.0), T(0), T(1), T(2)),
        case("masked_fill", "maskedFill", [a, row > 0, -1.5], a.masked_fill(row > 0, -1.5), T(0), T(1), T(2)),
        # reductions
        case("mean dims", ".mean", [batch], batch.mean(dim=(0, 2)), T(0), [0, 2], False),
        case("any dim", ".any", [a > 1], (a > 1).any(dim=1), T(0), [1], False),
        case("all", ".all", [a > -5], (a > -5).all(), T(0)),
        case("max all", ".max", [a], a.max(), T(0)),
        case("max dim values", ".max", [batch], batch.max(dim=1).values, T(0), 1, False, pick="values"),
        case("max dim indices", ".max", [batch], batch.max(dim=1).indices, T(0), 1, False, pick="indices"),
        case("min dim keepdim values", ".min", [batch], batch.min(dim=-1, keepdim=True).values, T(0), -1, True, pick="values"),
        case("min dim keepdim indices", ".min", [batch], batch.min(dim=-1, keepdim=True).indices, T(0), -1, True, pick="indices"),
        case("argmax flat", ".argmax", [a], a.argmax(), T(0)),
        case("argmax dim", ".argmax", [batch], batch.argmax(dim=2), T(0), 2, False),
        case("softmax", ".softmax", [batch], batch.softmax(dim=-1), T(0), -1),
        case("log_softmax", ".logSoftmax", [batch], batch.log_softmax(dim=1), T(0), 1),
        # shape and view
        case("reshape -1", ".reshape", [batch], batch.reshape(6, -1), T(0), [6, -1]),
        case("flatten 1..2", ".flatten", [batch], batch.flatten(1, 2), T(0), 1, 2),
        case("unflatten", ".unflatten", [a], a.unflatten(1, (2, 2)), T(0), 1, [2, 2]),
        case("permute", ".permute", [batch], batch.permute(2, 0, 1), T(0), [2, 0, 1]),
        case("transpose", ".transpose", [batch], batch.transpose(0, 2), T(0), 0, 2),
        case("unsqueeze", ".unsqueeze", [a], a.unsqueeze(1), T(0), 1),
        case("squeeze dim", ".squeeze", [a.unsqueeze(0)], a.unsqueeze(0).squeeze(0), T(0), 0),
        case("expand", ".expand", [row.unsqueeze(0)], row.unsqueeze(0).expand(3, 4), T(0), [3, -1]),
        case("cat dim 1", "cat", [a, a * 2], torch.cat([a, a * 2], dim=1), [T(0), T(1)], 1),
        case("stack dim 0", "stack", [a, a + 1], torch.stack([a, a + 1]), [T(0), T(1)], 0),
        case("split second piece", ".split", [batch], torch.split(batch, 2, dim=2)[1], T(0), 2, 2, pick=1),
        case("chunk last piece", ".chunk", [torch.arange(11.0)], torch.chunk(torch.arange(11.0), 4)[3], T(0), 4, 0, pick=3),
        case("unbind piece", ".unbind", [batch], torch.unbind(batch, 1)[2], T(0), 1, pick=2),
        case("get int and slice", ".get", [batch], batch[1, 1:3], T(0), *[1, {"slice": [1, 3, 1]}]),
        case("get step and newaxis", ".get", [batch], batch[:, None, ::2], T(0), *[{"slice": [None, None, 1]}, None, {"slice": [None, None, 2]}]),
        case("get ellipsis negative", ".get", [batch], batch[..., -1], T(0), *["...", -1]),
        case("index select", ".indexSelect", [batch, torch.tensor([2, 0, 2])], batch.index_select(1, torch.tensor([2, 0, 2])), T(0), 1, T(1)),
        case("repeat", ".repeat", [a], a.repeat(2, 1, 3), T(0), *[2, 1, 3]),
        case("repeat_interleave", ".repeatInterleave", [a], a.repeat_interleave(2, dim=0), T(0), 2, 0),
        case("set int and slice", ".set", [batch, torch.tensor([7.0, 8.0, 9.0, 10.0])], assigned(batch, (1, slice(1, 3)), torch.tensor([7.0, 8.0, 9.0, 10.0])), T(0), *[1, {"slice": [1, 3, 1]}], T(1)),
        case("set ellipsis step scalar", ".set", [a, -2.5], assigned(a, (Ellipsis, slice(None, None, 2)), -2.5), T(0), *["...", {"slice": [None, None, 2]}], T(1)),
        case("pad", "F.pad", [batch], torch.nn.functional.pad(batch, (1, 2, 0, 1), value=-1.0), T(0), [1, 2, 0, 1], {"value": -1.0}),
    ]
    cases += nn_cases(g)
    random = []
    for fn in ("rand", "randn"):
        for seed in (0, 7, 123456789):
            gen = torch.Generator().manual_seed(seed)
            t = getattr(torch, fn)(3, 5, generator=gen)
            random.append({"op": fn, "seed": seed, "expected": enc(t)})
    out = {"torch": torch.__version__, "cases": cases, "random": random}
    json.dumps(out, allow_nan=False)  # fail here rather than write invalid JSON
    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engine_ops.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path} ({len(cases)} cases, {len(random)} random)")


if __name__ == "__main__":
    main()
