"""GPU busy time of a run, from torch.profiler: what the anchor sides of bench/hf report beside wall time."""
import torch


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
