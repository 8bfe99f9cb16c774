"""PyTorch's values for dt.Generator: several draws in a row from one torch.Generator.

Run from the repository root: .venv/bin/python tools/reference/make_generator_fixtures.py
Writes tests/fixtures/generator_draws.json: for each sequence, its seed and draws (op, shape,
dtype, randint's bounds) and the values each draw gave, bfloat16 values as float32. The
sequences mix sizes below and above 16 (torch's normal_fill works in blocks of 16 and redraws
the tail) and a pipeline's order (a VAE sample, then the noise).
"""
import json
import pathlib

import torch

SEQUENCES = [
    {"seed": 0, "draws": [
        {"op": "randn", "shape": [2, 4, 3, 5], "dtype": "float32"},
        {"op": "randn", "shape": [2, 4, 3, 5], "dtype": "float32"},
    ]},
    {"seed": 7, "draws": [
        {"op": "randn", "shape": [5], "dtype": "float32"},
        {"op": "rand", "shape": [3, 7], "dtype": "float32"},
        {"op": "randint", "shape": [6], "dtype": "int64", "low": -3, "high": 9},
        {"op": "randn", "shape": [17], "dtype": "bfloat16"},
        {"op": "randn", "shape": [4, 4], "dtype": "float32"},
    ]},
    {"seed": 123456789, "draws": [
        {"op": "randn", "shape": [1, 16, 4, 6], "dtype": "bfloat16"},
        {"op": "randn", "shape": [1, 16, 4, 6], "dtype": "bfloat16"},
        {"op": "rand", "shape": [3], "dtype": "float64"},
    ]},
]

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64, "int64": torch.int64}


def main():
    for seq in SEQUENCES:
        g = torch.Generator().manual_seed(seq["seed"])
        for d in seq["draws"]:
            dtype = DTYPES[d["dtype"]]
            if d["op"] == "randint":
                t = torch.randint(d["low"], d["high"], d["shape"], generator=g, dtype=dtype)
            else:
                t = getattr(torch, d["op"])(*d["shape"], generator=g, dtype=dtype)
            d["values"] = (t.float() if dtype == torch.bfloat16 else t).flatten().tolist()
    path = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "generator_draws.json"
    path.write_text(json.dumps({"torch": torch.__version__, "sequences": SEQUENCES}) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
