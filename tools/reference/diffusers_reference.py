"""Reference formulas of diffusers that the fixture scripts need (diffusers is not a wheel here).

apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=..., sequence_dim=...): diffusers'
embeddings.apply_rotary_emb, written out from its documented math.
"""
import torch


def apply_rotary_emb(x, cos, sin, unbind_dim, sequence_dim=2):
    # [S, D] tables over x [B, H, S, D] (sequence_dim 2) or [B, S, H, D] (1, as Flux rotates)
    cos, sin = (cos[None, None], sin[None, None]) if sequence_dim == 2 else (cos[None, :, None], sin[None, :, None])
    if unbind_dim == -1:  # Flux, CogVideoX: neighbours pair up
        re, im = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
        rotated = torch.stack([-im, re], dim=-1).flatten(3)
    else:  # Stable Audio, CogView4: the two halves pair up
        re, im = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
        rotated = torch.cat([-im, re], dim=-1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)
