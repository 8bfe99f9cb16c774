"""GPU busy time of a run, from torch.profiler: what the anchor sides of bench/hf report beside wall
time, and (kernel_breakdown) where that time goes, split by kernel_categories.json as DTorch's side is."""
import json
import os
import re

import torch

_CATEGORIES = [(name, re.compile(pattern, re.I)) for name, pattern in
               json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_categories.json")))["categories"]]


def category(name):
    """The kernel_categories.json category of a kernel name ('other' when none matches)."""
    return next((c for c, pattern in _CATEGORIES if pattern.search(name)), "other")


def kernel_breakdown(run, sync, top=25):
    """One run()'s kernels: {"categories": {category: ms}, "top": [{name, calls, ms}, ...]}."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        sync()
    per_name = {}
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        calls, ms = per_name.get(e.name, (0, 0.0))
        per_name[e.name] = (calls + 1, ms + (e.time_range.end - e.time_range.start) / 1000)
    categories = {}
    for name, (_, ms) in per_name.items():
        categories[category(name)] = categories.get(category(name), 0.0) + ms
    ranked = sorted(per_name.items(), key=lambda kv: -kv[1][1])[:top]
    return {"categories": {c: round(ms, 3) for c, ms in sorted(categories.items(), key=lambda kv: -kv[1])},
            "top": [{"name": n[:200], "calls": c, "ms": round(ms, 3)} for n, (c, ms) in ranked]}


def busy_ms(run, sync):
    """GPU busy time of one run(): the union of its kernels', copies' and fills' intervals."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        sync()
    intervals = sorted((e.time_range.start, e.time_range.end) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    total, end = 0.0, float("-inf")
    for s, e in intervals:
        if s >= end:
            total, end = total + (e - s), e
        elif e > end:
            total, end = total + (e - end), e
    return total / 1000, len(intervals)
