import json, torch
def t(f):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    f(); torch.cuda.synchronize(); best = 1e9
    for _ in range(5):
        s.record()
        for _ in range(20): f()
        e.record(); e.synchronize(); best = min(best, s.elapsed_time(e) / 20)
    return best
bf = dict(device="cuda", dtype=torch.bfloat16)
for m in (2304, 4608):
    for k, n in ((3072, 3072), (3072, 9216), (3072, 12288), (3072, 21504), (12288, 3072), (15360, 3072), (3072, 6144), (6144, 3072)):
        x, w, b = torch.randn(m, k, **bf), torch.randn(n, k, **bf), torch.zeros(n, **bf)
        ms = t(lambda: torch.nn.functional.linear(x, w, b))
        print(json.dumps({"m": m, "k": k, "n": n, "us": round(ms * 1000, 1), "tflops": round(2 * m * k * n / ms / 1e9, 1)}))
x = torch.randn(1, 2304, 9216, **bf)
q = x[..., :3072].reshape(1, 2304, 24, 128).transpose(1, 2); w = torch.ones(128, **bf)
print(json.dumps({"op": "rms_norm strided q", "us": round(t(lambda: torch.nn.functional.rms_norm(q, (128,), w, 1e-6)) * 1000, 1)}))
qc = q.contiguous()
print(json.dumps({"op": "rms_norm contiguous", "us": round(t(lambda: torch.nn.functional.rms_norm(qc, (128,), w, 1e-6)) * 1000, 1)}))
print(json.dumps({"op": "contiguous v", "us": round(t(lambda: q.contiguous()) * 1000, 1)}))
h = torch.randn(1, 2304, 3072, **bf)
print(json.dumps({"op": "layer_norm", "us": round(t(lambda: torch.nn.functional.layer_norm(h, (3072,), eps=1e-6)) * 1000, 1)}))
wn, tb = torch.randn(9216, 3072, **bf), torch.randn(1, 3072, **bf)
print(json.dumps({"op": "modulation gemv", "us": round(t(lambda: torch.nn.functional.linear(tb, wn)) * 1000, 1)}))
