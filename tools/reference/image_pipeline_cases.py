"""The image pipelines' fixture cases (make_img2img_fixtures.py, make_inpaint_fixtures.py,
make_fill_fixtures.py, make_kontext_fixtures.py): a case's arguments with its files opened, and
each case run for its final latents and its images at the case's seed."""
import torch

FILE_KEYS = ("image", "mask_image")


def arguments(case, files):
    """The case's pipeline arguments: its own, less name, pipeline and seed, with the pictures it names (one, or a list)."""
    args = {k: v for k, v in case.items() if k not in ("name", "pipeline", "seed", *FILE_KEYS)}
    for key in FILE_KEYS:
        if key in case:
            names = case[key]
            args[key] = files[names[0]] if len(names) == 1 else [files[n] for n in names]
    return args


@torch.no_grad()
def run_cases(cases, pipe_of, files, **extra):
    """{"<name>.latent", "<name>.image"} of each case through pipe_of(case), float32, from torch.Generator("cpu").manual_seed(seed)."""
    tensors = {}
    for case in cases:
        pipe = pipe_of(case)
        for output_type, key in (("latent", "latent"), ("pt", "image")):
            generator = torch.Generator("cpu").manual_seed(case["seed"])
            result = pipe(**arguments(case, files), **extra, generator=generator, output_type=output_type).images
            tensors[f"{case['name']}.{key}"] = result.float().contiguous()
    return tensors
