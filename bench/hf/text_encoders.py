"""transformers side of bench/hf/text_encoders.mjs: the same text encoders, sizes and inputs,
run by transformers' own model classes (random weights from their own init, on the GPU), eager
and under torch.compile(mode="reduce-overhead") (CUDA graphs), in the same run as DTorch.

Usage: python text_encoders.py DEVICE DTYPE MODELS ITERS ROUNDS COMPILE
  MODELS: comma-separated names of bench/hf/models.json; COMPILE: 1 to time compiled models too.
Prints one JSON line per model and mode: latency (each forward waited for), pipelined
(forwards queued back to back) in ms, and from torch.profiler the GPU's busy time in one
forward (the union of its kernels' intervals) and the share of the latency it sat idle.
"""
import json
import pathlib
import sys
import time

import torch
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, T5Config, T5EncoderModel
from gpu_busy import busy_ms

classes = {"T5EncoderModel": (T5Config, T5EncoderModel), "CLIPTextModel": (CLIPTextConfig, CLIPTextModel),
           "CLIPTextModelWithProjection": (CLIPTextConfig, CLIPTextModelWithProjection)}


def input_ids(spec):
    vocab, tokens = spec["config"]["vocab_size"], spec["tokens"]
    # the ids bench/hf/text_encoders.mjs uses: deterministic, spread over the vocabulary
    return torch.tensor([[(i * 7919) % (vocab - 2) + 1 for i in range(tokens)]], dtype=torch.long)




def main():
    device, dtype_name, models, iters, rounds, compile_too = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
    dtype = getattr(torch, dtype_name)
    specs = json.loads((pathlib.Path(__file__).parent / "models.json").read_text())
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for name in models:
        spec = specs[name]
        config_class, model_class = classes[spec["class"]]
        config = config_class(**spec["config"])
        with torch.device(device):
            model = model_class(config).to(dtype).eval()
        ids = input_ids(spec).to(device)
        modes = [("eager", model)] + ([("compiled", torch.compile(model, mode="reduce-overhead"))] if compile_too and device == "cuda" else [])
        results = []
        with torch.inference_mode():
            for mode, m in modes:
                compile_start = time.perf_counter()
                for _ in range(3):  # warm-up: kernels, allocator, compilation and graph capture
                    m(input_ids=ids)
                sync()
                warmup_s = time.perf_counter() - compile_start
                latency = pipelined = float("inf")
                for _ in range(rounds):
                    start = time.perf_counter()
                    for _ in range(iters):
                        m(input_ids=ids)
                        sync()
                    latency = min(latency, (time.perf_counter() - start) * 1000 / iters)
                    start = time.perf_counter()
                    for _ in range(iters):
                        m(input_ids=ids)
                    sync()
                    pipelined = min(pipelined, (time.perf_counter() - start) * 1000 / iters)
                results.append((mode, m, latency, pipelined, warmup_s))
            # traced after every timing: a profiler leaves the process slower to launch kernels
            for mode, m, latency, pipelined, warmup_s in results:
                busy, events = busy_ms(lambda: m(input_ids=ids), sync) if device == "cuda" else (None, None)
                checksum = m(input_ids=ids).last_hidden_state.float().abs().mean().item()
                print(json.dumps({"bench": "hf_text_encoders", "side": f"transformers_{mode}", "model": name, "device": device, "dtype": dtype_name,
                                  "tokens": spec["tokens"], "latency_ms": round(latency, 3), "pipelined_ms": round(pipelined, 3),
                                  "gpu_busy_ms": None if busy is None else round(busy, 3), "gpu_events": events,
                                  "gpu_idle_share": None if busy is None else round(1 - busy / latency, 3), "warmup_s": round(warmup_s, 1),
                                  "checksum": checksum, "torch": torch.__version__, "transformers": __import__("transformers").__version__}), flush=True)
        del results
        del model, modes
        torch.cuda.empty_cache() if device == "cuda" else None


if __name__ == "__main__":
    main()
