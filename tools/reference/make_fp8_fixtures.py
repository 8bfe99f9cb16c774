"""References for DTorch's FP8 linears (dt.F.fp8Linear, nn.quantizeFp8, fromPretrained { quantize: 'fp8' }).

Run from the repository root with diffusers' sources on the path (diffusers is not a wheel here):
    PYTHONPATH=/work/diffusers-src/src .venv/bin/python tools/reference/make_fp8_fixtures.py
The recipe, torchao's row-wise float8 (what torch._scaled_mm computes on Hopper GPUs), written with
PyTorch's casts on the CPU: a weight W [out, in] gets one float32 scale per row, amax(|row|) / 448
(amax at least 1e-12), and the row divided by it, clamped to ±448 and cast to float8_e4m3fn; an
input x is quantized the same way per token (per row of its last dim); the product is
(x_q · s_x) (W_q · s_W)ᵀ in float32, plus the bias, in x's dtype. Writes tests/fixtures/fp8/:
  fp8_linear.safetensors   "<case>.x", ".weight" (the float weight), ".bias", ".weight_q" (float8_e4m3fn),
                           ".weight_scale", ".y" for cases f32 ([5, 48] x, [32, 48] weight, bias) and bf16 (x,
                           weight and bias bfloat16, [2, 3, 64] x, [48, 64] weight)
  tiny-pipelines.safetensors  "<case>.latent": the final latents of diffusers' FluxPipeline / StableDiffusion3Pipeline
                           built as the tiny pipelines (make_flux_pipeline_fixtures.build, make_sd3_pipeline_fixtures
                           .build) with the transformer's block linears quantized by the recipe (DTorch's rule:
                           a path with a block index and no "norm*" part; in and out multiples of 16; Flux's
                           single-block proj_out quantizes its two concatenated inputs each over its own width), float32:
                           flux (one prompt, 32x32, 2 steps, seed 0, max_sequence_length 8), flux.t5 (the same with
                           T5's block linears quantized too), sd3 (CFG 5 with a negative prompt, 32x32, 2 steps, seed 0)
  checkpoints/<layout>/    tiny-flux's FluxTransformer2DModel (its tiny-flux.json config and seed) saved as an FP8
                           checkpoint, the block linears' weights 8-bit in the file, everything else float32:
                             channel  float8_e4m3fn weights, "<linear>.weight_scale" float32 [out, 1] (compressed-tensors,
                                      FBGEMM, torchao exports)
                             tensor   float8_e4m3fn weights, "<linear>.scale_weight" float32 scalar and the "scaled_fp8"
                                      marker (ComfyUI's scaled FP8 checkpoints)
                             plain    float8_e4m3fn weights cast from the float ones, no scales (Kijai's flux1-dev-fp8)
                             e5m2     float8_e5m2 weights cast, no scales
                           and checkpoints.safetensors: the inputs of one call ("inputs.hidden_states",
                           "inputs.encoder_hidden_states", "inputs.pooled_projections", "inputs.timestep", "inputs.guidance",
                           "inputs.img_ids", "inputs.txt_ids") and "<layout>.output": the model with those weights (the
                           file's bytes and scales as they are; e5m2 dequantized and quantized again per row, as DTorch
                           loads it) and the recipe's per-token activations
  single_file/tiny-flux-fp8-scaled.safetensors
                           tests/fixtures/hf/single_file/tiny-flux.safetensors (BFL's layout) as ComfyUI writes
                           scaled FP8 files: the blocks' linear weights (qkv, proj, mlp, linear1, linear2; not the
                           modulations) float8_e4m3fn with "<key>.scale_weight" (amax / 448 of the fused tensor),
                           the "scaled_fp8" marker, the rest float32; and "single_file.output" in checkpoints.safetensors:
                           diffusers' model converted from the dequantized file (its conversion, as make_single_file_
                           fixtures.py runs it) with those linears taking the recipe's per-token activations, on
                           io.safetensors' tiny-flux inputs
"""
import json
import pathlib
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_flux_pipeline_fixtures as flux_fixtures  # noqa: E402
import make_sd3_pipeline_fixtures as sd3_fixtures  # noqa: E402
from tiny_pipeline_assets import tiny_spec  # noqa: E402

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests" / "fixtures" / "fp8"
E4M3_MAX = 448.0
MIN_AMAX = 1e-12


def quantize_rows(t):
    """float8_e4m3fn rows and float32 scales [rows, 1] of t (float32 math)."""
    f = t.float()
    scale = f.abs().amax(dim=-1, keepdim=True).clamp(min=MIN_AMAX) / E4M3_MAX
    return (f / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def fp8_linear(x, weight_q, weight_scale, bias):
    """The recipe's product: x quantized per token, both dequantized, multiplied in float32, in x's dtype."""
    xq, xs = quantize_rows(x)
    w = weight_q.float() * weight_scale.unsqueeze(1)
    y = torch.nn.functional.linear(xq.float() * xs, w, None if bias is None else bias.float())
    return y.to(x.dtype)


class Fp8Linear(torch.nn.Module):
    """An nn.Linear run with the recipe (its weight quantized once)."""

    def __init__(self, linear):
        super().__init__()
        q, s = quantize_rows(linear.weight.detach())
        self.weight_q, self.weight_scale, self.bias = q, s.squeeze(1), linear.bias
        self.weight = linear.weight  # what T5's feed-forward reads the dtype of; not used in forward

    def forward(self, x):
        return fp8_linear(x, self.weight_q, self.weight_scale, self.bias)


class Fp8PartsLinear(Fp8Linear):
    """A linear over concatenated inputs (Flux's single-block proj_out over [attention, MLP]), each part's
    tokens quantized over the part's own width: the product as the sum of the parts' products."""

    def __init__(self, linear, widths):
        super().__init__(linear)
        self.widths = widths

    def forward(self, x):
        parts, offset, y = x.split(self.widths, dim=-1), 0, None
        for i, part in enumerate(parts):
            w = self.weight_q[:, offset:offset + part.shape[-1]]
            p = fp8_linear(part, w, self.weight_scale, self.bias if i == 0 else None)
            y = p if y is None else y + p
            offset += part.shape[-1]
        return y


def fp8_rule(path, linear):
    parts = path.split(".")
    return (any(p.isdigit() for p in parts) and not any(p.startswith("norm") for p in parts)
            and linear.in_features % 16 == 0 and linear.out_features % 16 == 0)


def quantize_model(model):
    targets = [(p, m) for p, m in model.named_modules() if isinstance(m, torch.nn.Linear) and fp8_rule(p, m)]
    for path, linear in targets:
        parent, _, name = path.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        # Flux's single blocks: proj_out reads cat([attention output, MLP output])
        parts = [owner.attn.inner_dim, owner.mlp_hidden_dim] if name == "proj_out" and hasattr(owner, "mlp_hidden_dim") else None
        setattr(owner, name, Fp8PartsLinear(linear, parts) if parts else Fp8Linear(linear))
    return [p for p, _ in targets]


def op_cases():
    g = torch.Generator().manual_seed(0)
    tensors = {}
    for name, dtype, xs, ws in (("f32", torch.float32, [5, 48], [32, 48]), ("bf16", torch.bfloat16, [2, 3, 64], [48, 64])):
        x = (torch.randn(xs, generator=g) * 3).to(dtype)
        x[0, ..., :] = 0 if dtype == torch.float32 else x[0, ..., :]  # a row of zeros (f32): scale from MIN_AMAX
        weight = (torch.randn(ws, generator=g) / ws[1] ** 0.5).to(dtype)
        bias = torch.randn(ws[0], generator=g).to(dtype)
        q, s = quantize_rows(weight)
        tensors.update({f"{name}.x": x, f"{name}.weight": weight, f"{name}.bias": bias, f"{name}.weight_q": q,
                        f"{name}.weight_scale": s.squeeze(1).contiguous(), f"{name}.y": fp8_linear(x, q, s.squeeze(1), bias)})
    return tensors


@torch.no_grad()
def pipeline_cases():
    tensors = {}
    flux_args = dict(prompt="a photo of a cat", height=32, width=32, num_inference_steps=2, max_sequence_length=8,
                     output_type="latent")
    for name, t5 in (("flux", False), ("flux.t5", True)):
        pipe, _ = flux_fixtures.build()
        quantize_model(pipe.transformer)
        if t5:
            quantize_model(pipe.text_encoder_2)
        generator = torch.Generator("cpu").manual_seed(0)
        tensors[f"{name}.latent"] = pipe(**flux_args, generator=generator).images.float().contiguous()
    tmp = pathlib.Path(tempfile.mkdtemp())
    try:
        pipe, _ = sd3_fixtures.build(tmp, tiny_spec("tiny-sd3"))
    finally:
        shutil.rmtree(tmp)
    quantize_model(pipe.transformer)
    generator = torch.Generator("cpu").manual_seed(0)
    tensors["sd3.latent"] = pipe(prompt="a photo of a cat", negative_prompt="blurry", guidance_scale=5.0, height=32,
                                 width=32, num_inference_steps=2, max_sequence_length=8, output_type="latent",
                                 generator=generator).images.float().contiguous()
    return tensors


class FileFp8Linear(Fp8Linear):
    """An nn.Linear whose weight is the file's float8 bytes and scales (one per row, broadcast from one per tensor)."""

    def __init__(self, linear, weight_q, scale):
        torch.nn.Module.__init__(self)
        self.weight_q, self.weight_scale, self.bias = weight_q, scale.float().reshape(-1).expand(weight_q.shape[0]).contiguous(), linear.bias
        self.weight = linear.weight


@torch.no_grad()
def checkpoint_cases():
    from diffusers import FluxTransformer2DModel
    from random_weights import fill_random_weights
    from tiny_pipeline_assets import component_config

    spec = tiny_spec("tiny-flux")
    config = component_config(spec, "transformer")
    g = torch.Generator().manual_seed(7)
    tokens, text = 16, 8
    inputs = {"hidden_states": torch.randn(1, tokens, config["in_channels"], generator=g),
              "encoder_hidden_states": torch.randn(1, text, config["joint_attention_dim"], generator=g),
              "pooled_projections": torch.randn(1, config["pooled_projection_dim"], generator=g),
              "timestep": torch.tensor([0.7]), "guidance": torch.tensor([3.5]),
              "img_ids": torch.stack([torch.zeros(tokens), torch.arange(tokens) // 4, torch.arange(tokens) % 4], 1).float(),
              "txt_ids": torch.zeros(text, 3)}
    tensors = {f"inputs.{k}": v.contiguous() for k, v in inputs.items()}
    for layout in ("channel", "tensor", "plain", "e5m2"):
        model = FluxTransformer2DModel(**config).eval()
        fill_random_weights(model, spec["seeds"]["transformer"])
        state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        targets = [(p, m) for p, m in model.named_modules() if isinstance(m, torch.nn.Linear) and fp8_rule(p, m)]
        for path, linear in targets:
            w = linear.weight.detach()
            if layout == "channel":
                q, s = quantize_rows(w)
                state[f"{path}.weight"], state[f"{path}.weight_scale"] = q, s.contiguous()
            elif layout == "tensor":
                s = (w.abs().amax().clamp(min=MIN_AMAX) / E4M3_MAX).float()
                q = (w / s).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
                state[f"{path}.weight"], state[f"{path}.scale_weight"] = q, s.reshape([])
            elif layout == "plain":
                q, s = w.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), torch.ones([])
                state[f"{path}.weight"] = q
            else:
                e5 = w.to(torch.float8_e5m2)
                state[f"{path}.weight"] = e5
                q, s = quantize_rows(e5.float())
            parent, _, name = path.rpartition(".")
            owner = model.get_submodule(parent)
            parts = [owner.attn.inner_dim, owner.mlp_hidden_dim] if name == "proj_out" and hasattr(owner, "mlp_hidden_dim") else None
            file_linear = FileFp8Linear(linear, q, s)
            if parts:
                file_linear.__class__ = type("FileFp8PartsLinear", (Fp8PartsLinear,), {})
                file_linear.widths = parts
            setattr(owner, name, file_linear)
        if layout == "tensor":
            state["scaled_fp8"] = torch.zeros(0, dtype=torch.float8_e4m3fn)
        folder = out / "checkpoints" / layout
        folder.mkdir(parents=True, exist_ok=True)
        save_file(state, folder / "diffusion_pytorch_model.safetensors", metadata={"format": "pt"})
        (folder / "config.json").write_text(json.dumps({"_class_name": "FluxTransformer2DModel", **config}, indent=1) + "\n")
        tensors[f"{layout}.output"] = model(**inputs, return_dict=False)[0].contiguous()
    single_file_case(tensors)
    save_file(tensors, out / "checkpoints.safetensors")


class ActQuantLinear(torch.nn.Module):
    """A linear whose weight is already the dequantized FP8 one: only its input takes the recipe."""

    def __init__(self, linear, widths=None):
        super().__init__()
        self.weight, self.bias, self.widths = linear.weight.detach(), linear.bias, widths

    def forward(self, x):
        parts = x.split(self.widths, dim=-1) if self.widths else [x]
        y, offset = None, 0
        for i, part in enumerate(parts):
            xq, xs = quantize_rows(part)
            w = self.weight[:, offset:offset + part.shape[-1]]
            p = torch.nn.functional.linear(xq.float() * xs, w, self.bias if i == 0 else None).to(x.dtype)
            y = p if y is None else y + p
            offset += part.shape[-1]
        return y


@torch.no_grad()
def single_file_case(tensors):
    from diffusers import FluxTransformer2DModel
    from safetensors.torch import load_file
    import make_single_file_fixtures as single

    source = root / "tests" / "fixtures" / "hf" / "single_file"
    bfl = load_file(str(source / "tiny-flux.safetensors"))
    config = json.loads((source / "configs.json").read_text())["tiny-flux"]
    io = load_file(str(source / "io.safetensors"))
    scaled, dequantized = {}, {}
    for key, w in bfl.items():
        fp8 = (key.startswith(("double_blocks.", "single_blocks.")) and key.endswith(".weight") and w.dim() == 2
               and "_mod." not in key and "modulation" not in key)
        if fp8:
            scale = (w.abs().amax().clamp(min=MIN_AMAX) / E4M3_MAX).float()
            q = (w / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
            scaled[key], scaled[key[:-len("weight")] + "scale_weight"] = q, scale.reshape([])
            dequantized[key] = q.float() * scale
        else:
            scaled[key] = dequantized[key] = w
    scaled["scaled_fp8"] = torch.zeros(0, dtype=torch.float8_e4m3fn)
    (out / "single_file").mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in scaled.items()}, str(out / "single_file" / "tiny-flux-fp8-scaled.safetensors"))
    model = FluxTransformer2DModel(**config).eval()
    convert = single.flux_conversion(model.config.num_attention_heads * model.config.attention_head_dim)
    model.load_state_dict(convert(dict(dequantized)), strict=True)
    for path, linear in [(p, m) for p, m in model.named_modules() if isinstance(m, torch.nn.Linear) and fp8_rule(p, m)]:
        parent, _, name = path.rpartition(".")
        owner = model.get_submodule(parent)
        parts = [owner.attn.inner_dim, owner.mlp_hidden_dim] if name == "proj_out" and hasattr(owner, "mlp_hidden_dim") else None
        setattr(owner, name, ActQuantLinear(linear, parts))
    inputs = {k[len("tiny-flux."):]: v for k, v in io.items() if k.startswith("tiny-flux.") and not k.endswith(".sample")}
    tensors["single_file.output"] = model(**inputs, return_dict=False)[0].contiguous()


def main():
    out.mkdir(parents=True, exist_ok=True)
    save_file(op_cases(), out / "fp8_linear.safetensors")
    checkpoint_cases()
    tensors = pipeline_cases()
    save_file(tensors, out / "tiny-pipelines.safetensors")
    for k, v in tensors.items():
        print(k, list(v.shape), float(v.abs().max()))


if __name__ == "__main__":
    main()
