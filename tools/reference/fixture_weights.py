"""Weights for the tiny reference models of the fixture scripts."""
import torch


def perturb(model, seed):
    """Norm weights and biases start at 1 and 0: give them values so a wrong one shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(torch.randn(p.shape, generator=g) * 0.2)
