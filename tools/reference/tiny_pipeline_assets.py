"""What the tiny-pipeline fixture scripts read from packages/hf/assets, as DTorch's tiny() reads it:
the spec (configs, seeds, tokenizers) of a built-in tiny pipeline and its gzipped tokenizer folders."""
import gzip
import json
import pathlib

assets = pathlib.Path(__file__).resolve().parents[2] / "packages" / "hf" / "assets"


def tiny_spec(name):
    """assets/tiny-pipelines/<name>.json."""
    return json.loads((assets / "tiny-pipelines" / f"{name}.json").read_text())


def component_config(spec, name):
    """A component's config as its class takes it: without "_class_name" and friends, or "dtype"."""
    return {k: v for k, v in spec[name].items() if not k.startswith("_") and k != "dtype"}


def unpack_tokenizer(name, into):
    """Tiny tokenizer `name` unpacked into the folder `into`/`name`; its path."""
    folder = pathlib.Path(into) / name
    folder.mkdir(parents=True)
    for file in (assets / "tiny-tokenizers" / name).iterdir():
        data = file.read_bytes()
        (folder / file.name.removesuffix(".gz")).write_bytes(gzip.decompress(data) if file.name.endswith(".gz") else data)
    return str(folder)
