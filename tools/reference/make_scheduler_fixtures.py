"""diffusers references for @dtorch/hf's FlowMatchEulerDiscreteScheduler.

Run from the repository root with the setup's Python and a diffusers checkout:
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_scheduler_fixtures.py
Writes tests/fixtures/hf/schedulers/:
  flow_match.json   for each case: the scheduler config, the set_timesteps arguments and diffusers'
                    `timesteps` and `sigmas` (float32 values, as doubles); the step() and
                    scale_noise() cases with their inputs and outputs as flat lists (bfloat16
                    values written as the float32 numbers they are); the steps also as diffusers
                    computes them on CUDA (`prevSamplesCuda`, which differs in bfloat16)
  sd3/scheduler/scheduler_config.json, flux/scheduler/scheduler_config.json
                    pipeline folders for fromPretrained (the configs SD3 and Flux ship)
"""
import json
import pathlib

import numpy as np
import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.pipelines.flux.pipeline_flux import calculate_shift

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "hf" / "schedulers"

# the scheduler configs of stabilityai/stable-diffusion-3-medium-diffusers and black-forest-labs/FLUX.1-dev
SD3 = {"num_train_timesteps": 1000, "shift": 3.0}
FLUX = {
    "num_train_timesteps": 1000,
    "shift": 3.0,
    "use_dynamic_shifting": True,
    "base_shift": 0.5,
    "max_shift": 1.15,
    "base_image_seq_len": 256,
    "max_image_seq_len": 4096,
}


def floats(t):
    return [float(v) for v in t.float().flatten().tolist()]


def schedule(name, config, n=None, set_shift=None, **kwargs):
    s = FlowMatchEulerDiscreteScheduler(**config)
    if set_shift is not None:
        s.set_shift(set_shift)
    s.set_timesteps(n, **kwargs)
    args = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
    case = {"name": name, "config": config, "n": n, "args": args, "timesteps": floats(s.timesteps), "sigmas": floats(s.sigmas)}
    if set_shift is not None:
        case["setShift"] = set_shift  # the training schedule (sigma_min) keeps the config's shift
    return case


def flux_mu(height, width):
    seq = (height // 16) * (width // 16)
    return seq, calculate_shift(seq, FLUX["base_image_seq_len"], FLUX["max_image_seq_len"], FLUX["base_shift"], FLUX["max_shift"])


def schedules():
    cases = []
    for n in (28, 4, 1):
        cases.append(schedule(f"sd3 n={n}", SD3, n))
    cases.append(schedule("default config n=10", {}, 10))
    for size in (256, 512, 1024):
        seq, mu = flux_mu(size, size)
        for n in (28, 4):
            # the Flux pipeline passes its own sigmas, linspace(1, 1/n, n)
            sigmas = np.linspace(1.0, 1 / n, n)
            case = schedule(f"flux {size}x{size} n={n}", FLUX, n, sigmas=sigmas, mu=mu)
            case["imageSeqLen"] = seq
            cases.append(case)
        cases.append(schedule(f"flux {size}x{size} n=28 default sigmas", FLUX, 28, mu=mu))
    _, mu = flux_mu(1024, 768)
    cases.append(schedule("flux linear time shift", {**FLUX, "time_shift_type": "linear"}, 8, sigmas=np.linspace(1.0, 1 / 8, 8), mu=mu))
    cases.append(schedule("sd3 custom sigmas", SD3, None, sigmas=[1.0, 0.8, 0.55, 0.3, 0.1]))
    cases.append(schedule("sd3 custom timesteps", SD3, None, timesteps=[1000.0, 750.0, 500.0, 250.0]))
    cases.append(schedule("shift_terminal 0.1", {**SD3, "shift_terminal": 0.1}, 12))
    cases.append(schedule("shift_terminal 0.1 custom sigmas", {**SD3, "shift_terminal": 0.1}, None, sigmas=np.linspace(1.0, 0.1, 6)))
    cases.append(schedule("invert_sigmas", {**SD3, "invert_sigmas": True}, 6))
    cases.append(schedule("set_shift 3.0 on shift 1.0", {}, 28, set_shift=3.0))
    cases.append(schedule("karras", {**SD3, "use_karras_sigmas": True}, 10))
    cases.append(schedule("exponential", {**SD3, "use_exponential_sigmas": True}, 10))
    cases.append(schedule("flux karras", {**FLUX, "use_karras_sigmas": True}, 8, sigmas=np.linspace(1.0, 1 / 8, 8), mu=1.0))
    return cases


def shifts():
    rows = []
    for h, w in ((256, 256), (512, 512), (1024, 1024), (1024, 768), (2048, 2048)):
        seq = (h // 16) * (w // 16)
        rows.append({"imageSeqLen": seq, "mu": calculate_shift(seq, 256, 4096, 0.5, 1.15)})
    rows.append({"imageSeqLen": 1000, "baseSeqLen": 128, "maxSeqLen": 8192, "baseShift": 0.3, "maxShift": 1.5, "mu": calculate_shift(1000, 128, 8192, 0.3, 1.5)})
    return rows


def cuda_step(s, index, model_output, sample, noise=None):
    """step() as diffusers computes it on CUDA: its sigmas stay on the CPU, and PyTorch's CUDA kernels
    read a CPU 0-d tensor as a float (a Python scalar's path) where its CPU kernels first round it to
    a bfloat16 operand's dtype. Checked on an H200 (torch 2.11): equal to the CUDA run, bit for bit."""
    sigma, sigma_next = s.sigmas[index], s.sigmas[index + 1]
    x = sample.to(torch.float32)
    if noise is not None:
        x0 = x - model_output * sigma.item()
        prev = (1.0 - sigma_next) * x0 + sigma_next * noise
    else:
        prev = x + model_output * (sigma_next - sigma).item()
    return prev.to(model_output.dtype)


def steps():
    """A few denoising steps on small tensors: step() called on scheduler.timesteps in order."""
    cases = []
    g = torch.Generator().manual_seed(0)
    shape = (2, 3, 4)
    for dtype in (torch.float32, torch.bfloat16):
        for name, config, kwargs in (("sd3", SD3, {}), ("flux", FLUX, {"sigmas": np.linspace(1.0, 1 / 6, 6), "mu": 0.8})):
            s = FlowMatchEulerDiscreteScheduler(**config)
            s.set_timesteps(6, **kwargs)
            sample = torch.randn(shape, generator=g).to(dtype)
            start = floats(sample)
            outputs, prev, prev_cuda = [], [], []
            cuda_sample = sample
            for i, t in enumerate(s.timesteps[:3]):
                model_output = torch.randn(shape, generator=g).to(dtype)
                cuda_sample = cuda_step(s, i, model_output, cuda_sample)
                sample = s.step(model_output, t, sample).prev_sample
                assert sample.dtype == dtype
                outputs.append(floats(model_output))
                prev.append(floats(sample))
                prev_cuda.append(floats(cuda_sample))
            args = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in kwargs.items()}
            cases.append({"name": f"{name} {str(dtype)[6:]}", "config": config, "n": 6, "args": args, "dtype": str(dtype)[6:],
                          "shape": list(shape), "timesteps": floats(s.timesteps[:3]), "sample": start, "modelOutputs": outputs, "prevSamples": prev, "prevSamplesCuda": prev_cuda})
    # stochastic sampling: the noise is randn of the sample's shape from the generator (float32)
    s = FlowMatchEulerDiscreteScheduler(**SD3, stochastic_sampling=True)
    s.set_timesteps(6)
    for dtype in (torch.float32, torch.bfloat16):
        s.set_timesteps(6)
        sample = torch.randn(shape, generator=g).to(dtype)
        model_output = torch.randn(shape, generator=g).to(dtype)
        t = s.timesteps[2]
        s.set_begin_index(2)
        noise = torch.randn(shape, generator=torch.Generator().manual_seed(7), dtype=torch.float32)
        prev_cuda = cuda_step(s, 2, model_output, sample, noise)
        prev = s.step(model_output, t, sample, generator=torch.Generator().manual_seed(7)).prev_sample
        cases.append({"name": f"sd3 stochastic {str(dtype)[6:]}", "config": {**SD3, "stochastic_sampling": True}, "n": 6, "args": {}, "dtype": str(dtype)[6:],
                      "shape": list(shape), "beginIndex": 2, "timesteps": [float(t)], "sample": floats(sample), "modelOutputs": [floats(model_output)],
                      "noise": floats(noise), "prevSamples": [floats(prev)], "prevSamplesCuda": [floats(prev_cuda)]})
    return cases


def scale_noise():
    cases = []
    g = torch.Generator().manual_seed(1)
    shape = (2, 3, 4)
    for dtype in (torch.float32, torch.bfloat16):
        s = FlowMatchEulerDiscreteScheduler(**SD3)
        s.set_timesteps(10)
        sample = torch.randn(shape, generator=g).to(dtype)
        noise = torch.randn(shape, generator=g).to(dtype)
        # img2img: strength 0.6 starts at index 4 (begin index set), one timestep per batch row
        t = s.timesteps[4:5].repeat(2)
        s.set_begin_index(4)
        begin = s.scale_noise(sample, t, noise)
        # no begin index: each row's timestep looked up in the schedule
        s2 = FlowMatchEulerDiscreteScheduler(**SD3)
        s2.set_timesteps(10)
        ts = torch.stack([s2.timesteps[1], s2.timesteps[7]])
        lookup = s2.scale_noise(sample, ts, noise)
        cases.append({"name": f"scale_noise {str(dtype)[6:]}", "config": SD3, "n": 10, "dtype": str(dtype)[6:], "shape": list(shape),
                      "sample": floats(sample), "noise": floats(noise),
                      "beginIndex": 4, "beginTimesteps": floats(t), "withBeginIndex": floats(begin),
                      "lookupTimesteps": floats(ts), "lookedUp": floats(lookup)})
    return cases


def write_pipeline(name, config):
    folder = out / name / "scheduler"
    folder.mkdir(parents=True, exist_ok=True)
    s = FlowMatchEulerDiscreteScheduler(**config)
    s.save_config(folder)  # scheduler_config.json as diffusers writes it (_class_name, _diffusers_version)
    (out / name / "model_index.json").write_text(json.dumps({"_class_name": "Pipeline", "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]}, indent=2) + "\n")


def main():
    out.mkdir(parents=True, exist_ok=True)
    data = {"torch": torch.__version__, "numpy": np.__version__, "schedules": schedules(), "calculateShift": shifts(), "steps": steps(), "scaleNoise": scale_noise()}
    (out / "flow_match.json").write_text(json.dumps(data) + "\n")
    write_pipeline("sd3", SD3)
    write_pipeline("flux", FLUX)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
