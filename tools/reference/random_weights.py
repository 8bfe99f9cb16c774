"""The built-in tiny pipelines' weights, drawn as packages/hf/src/pipelines/random_weights.ts draws
them, so a diffusers or transformers module filled here equals DTorch's tiny component exactly:
parameters in sorted key order, the k-th from torch.randn(shape, generator=manual_seed(seed + k)) in
float32, scaled (2-D and up: / sqrt(fan_in); 1-D "...weight": 1 + 0.1 * randn; other 1-D: 0.1 *
randn), then cast to the parameter's dtype. Buffers keep their values.
"""
import math

import torch


@torch.no_grad()
def fill_random_weights(module, seed):
    params = sorted(module.named_parameters(), key=lambda kv: kv[0])
    for k, (key, p) in enumerate(params):
        g = torch.Generator().manual_seed(seed + k)
        draw = torch.randn(tuple(p.shape), generator=g, dtype=torch.float32)
        if p.dim() >= 2:
            value = draw * (1 / math.sqrt(math.prod(p.shape[1:])))
        elif key.endswith("weight"):
            value = draw * 0.1 + 1
        else:
            value = draw * 0.1
        p.copy_(value.to(p.dtype))
