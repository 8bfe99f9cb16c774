"""The drawn scenes the shapes-flux pipeline learns: a caption grammar, the pictures (Pillow) and the
check that a picture shows what its caption says.

Grammar: "a [small|large] <colour> <shape> [at the <position>] [and a ...] on a <colour> background".
Every scene is drawn from a seeded generator alone (numpy's PCG64 keyed by [seed, stream, index]),
so a training run, its held-out set and its evaluation are the same on every machine.
"""
import zlib

import numpy as np
from PIL import Image, ImageDraw

SIZE = 128  # pixels, square
SUPERSAMPLE = 4  # drawn at 4x, then box-filtered down: soft edges as a photo of a drawing would have

# The palette: the names captions use and the colour each is drawn in.
COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 160, 50),
    "blue": (35, 70, 220),
    "yellow": (250, 215, 20),
    "orange": (250, 135, 10),
    "purple": (135, 45, 175),
    "white": (245, 245, 245),
    "black": (15, 15, 15),
}
SHAPES = ("circle", "square", "triangle", "star", "ring")
# Where "at the <position>" puts an object's centre, as fractions of the width and height.
POSITIONS = {
    "top left": (0.25, 0.25), "top": (0.5, 0.25), "top right": (0.75, 0.25),
    "left": (0.25, 0.5), "centre": (0.5, 0.5), "right": (0.75, 0.5),
    "bottom left": (0.25, 0.75), "bottom": (0.5, 0.75), "bottom right": (0.75, 0.75),
}
RADIUS = {"small": 0.1, "large": 0.2}  # circumradius as a fraction of the width
JITTER = 3  # pixels a positioned object's centre may move
MARGIN = 4  # pixels every object keeps from the border (the border shows the background)
HELD_OUT_EVERY = 20  # captions whose CRC-32 is 0 mod 20 are never trained on


def held_out(caption):
    """Whether a caption belongs to the held-out set (5% of all captions, by a hash of its text)."""
    return zlib.crc32(caption.encode()) % HELD_OUT_EVERY == 0


def rng_for(seed, stream, index):
    """The generator of scene `index` of `stream` (0 VAE, 1 transformer, 2 evaluation, 3 tests)."""
    return np.random.Generator(np.random.PCG64([seed, stream, index]))


def _object(rng, taken_colours, positions_taken, with_position):
    colour = str(rng.choice([c for c in COLOURS if c not in taken_colours]))
    shape = str(rng.choice(SHAPES))
    size_word = str(rng.choice(["small", "large", ""]))
    size = size_word or str(rng.choice(["small", "large"]))
    position = str(rng.choice([p for p in POSITIONS if p not in positions_taken])) if with_position else ""
    return {"colour": colour, "shape": shape, "size": size, "size_word": size_word, "position": position}


def _article(word):
    return "an" if word[0] in "aeiou" else "a"


def _phrase(obj):
    words = [_article(obj["size_word"] or obj["colour"]), obj["size_word"], obj["colour"], obj["shape"]]
    if obj["position"]:
        words += ["at the", obj["position"]]
    return " ".join(w for w in words if w)


def caption_of(scene):
    return " and ".join(_phrase(o) for o in scene["objects"]) + f" on {_article(scene['background'])} {scene['background']} background"


def _far_enough(objects):
    """Two objects must not overlap: their centres lie further apart than their radii and a gap."""
    if len(objects) < 2:
        return True
    (a, b) = objects
    return np.hypot(a["cx"] - b["cx"], a["cy"] - b["cy"]) >= a["r"] + b["r"] + 4


def random_scene(rng):
    """A scene: background, one or two objects (with centre cx, cy and radius r in pixels), caption."""
    while True:
        background = str(rng.choice(list(COLOURS)))
        count = 1 if rng.random() < 0.7 else 2
        with_position = rng.random() < (0.7 if count == 1 else 0.85)
        objects = []
        for _ in range(count):
            obj = _object(rng, [background] + [o["colour"] for o in objects], [o["position"] for o in objects], with_position)
            r = RADIUS[obj["size"]] * SIZE * rng.uniform(0.9, 1.1)
            if obj["position"]:
                fx, fy = POSITIONS[obj["position"]]
                cx, cy = fx * SIZE + rng.uniform(-JITTER, JITTER), fy * SIZE + rng.uniform(-JITTER, JITTER)
            else:
                cx, cy = rng.uniform(r + MARGIN, SIZE - r - MARGIN, size=2)
            obj.update(cx=float(cx), cy=float(cy), r=float(r), angle=float(rng.uniform(-12, 12)))
            objects.append(obj)
        scene = {"background": background, "objects": objects}
        if _far_enough(objects):
            scene["caption"] = caption_of(scene)
            return scene


def scene_for(seed, stream, index, want_held_out=False):
    """Scene `index` of a stream: drawn until its caption is (held-out set) or is not (training) held out."""
    rng = rng_for(seed, stream, index)
    while True:
        scene = random_scene(rng)
        if held_out(scene["caption"]) == want_held_out:
            return scene


def _polygon(cx, cy, radii, angle_deg):
    n = len(radii)
    t = np.deg2rad(angle_deg) - np.pi / 2 + 2 * np.pi * np.arange(n) / n
    return [(float(cx + r * np.cos(a)), float(cy + r * np.sin(a))) for r, a in zip(radii, t)]


def draw(scene):
    """The scene as an RGB PIL image of SIZE x SIZE pixels."""
    s = SUPERSAMPLE
    image = Image.new("RGB", (SIZE * s, SIZE * s), COLOURS[scene["background"]])
    pen = ImageDraw.Draw(image)
    for o in scene["objects"]:
        cx, cy, r, fill = o["cx"] * s, o["cy"] * s, o["r"] * s, COLOURS[o["colour"]]
        if o["shape"] == "circle":
            pen.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
        elif o["shape"] == "ring":
            pen.ellipse([cx - r, cy - r, cx + r, cy + r], outline=fill, width=max(1, round(0.38 * r)))
        elif o["shape"] == "square":
            pen.polygon(_polygon(cx, cy, [r * 0.85] * 4, o["angle"] + 45), fill=fill)
        elif o["shape"] == "triangle":
            pen.polygon(_polygon(cx, cy + 0.15 * r, [r * 1.1] * 3, o["angle"]), fill=fill)
        elif o["shape"] == "star":
            pen.polygon(_polygon(cx, cy, [r * 1.1, r * 0.48] * 5, o["angle"]), fill=fill)
    return image.resize((SIZE, SIZE), Image.Resampling.BOX)


# ---- the check: does a picture show its caption? ----

PALETTE = np.array(list(COLOURS.values()), dtype=np.float32)
NAMES = list(COLOURS)
BORDER = 3  # pixels of the border ring whose colour must be the background


def colour_names(pixels):
    """Each pixel's nearest palette colour: an (H, W) array of indices into NAMES."""
    d = ((pixels[..., None, :].astype(np.float32) - PALETTE) ** 2).sum(-1)
    return d.argmin(-1)


def solid(mask):
    """The pixels of a mask whose 3x3 neighbourhood is all in it: an edge where two colours blend
    (red on yellow reads as orange) is one pixel wide and drops out."""
    inner = mask.copy()
    inner[0, :] = inner[-1, :] = inner[:, 0] = inner[:, -1] = False
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            inner[1:-1, 1:-1] &= mask[1 + dy:mask.shape[0] - 1 + dy, 1 + dx:mask.shape[1] - 1 + dx]
    return inner


def parse_caption(caption):
    """The background and the objects (colour, shape, position or None) a caption names."""
    head, background = caption.rsplit(" on ", 1)
    background = background.split(" ", 1)[1]
    objects = []
    for phrase in head.split(" and "):
        words = phrase.split(" at the ")
        position = words[1] if len(words) > 1 else None
        colour, shape = words[0].split()[-2:]
        objects.append({"colour": colour, "shape": shape, "position": position})
    return {"background": background.removesuffix(" background"), "objects": objects}


def measure(pixels, caption):
    """What the check looks at: the border ring's commonest colour, and for each object the share of
    the picture solidly in its colour (see solid) and (positioned objects) how far the centre of those pixels lies from
    where the caption puts it, as a fraction of the width."""
    h, w = pixels.shape[:2]
    names = colour_names(pixels)
    wanted = parse_caption(caption)
    ring = np.ones((h, w), bool)
    ring[BORDER:h - BORDER, BORDER:w - BORDER] = False
    border = NAMES[np.bincount(names[ring], minlength=len(NAMES)).argmax()]
    objects = []
    for o in wanted["objects"]:
        mask = solid(names == NAMES.index(o["colour"]))
        found = {"spread": float(mask.mean()), "offset": None}
        if o["position"] and mask.any():
            ys, xs = np.nonzero(mask)
            fx, fy = POSITIONS[o["position"]]
            found["offset"] = float(np.hypot(xs.mean() + 0.5 - fx * w, ys.mean() + 0.5 - fy * h) / w)
        objects.append(found)
    return {"border": border, "background": wanted["background"], "objects": objects, "positioned": [o["position"] is not None for o in wanted["objects"]]}


def check(pixels, caption):
    """Whether an (H, W, 3) uint8 picture shows its caption, item by item:

    - background: the border ring's commonest colour is the background's;
    - each object: its colour covers at least MIN_SPREAD of the picture, and when the caption gives
      its position, the centre of its colour's pixels lies within MAX_OFFSET of that position.
    """
    m = measure(pixels, caption)
    objects = [o["spread"] >= MIN_SPREAD and (not positioned or (o["offset"] is not None and o["offset"] <= MAX_OFFSET))
               for o, positioned in zip(m["objects"], m["positioned"])]
    background = m["border"] == m["background"]
    return {"ok": background and all(objects), "background": background, "objects": objects}


# Set from the drawn pictures themselves (`python3 tools/shapes/scenes.py` prints the least spread
# and the largest offset that 5,000 drawn scenes reach): MIN_SPREAD about half the least spread,
# MAX_OFFSET well beyond the largest offset and well short of the 0.25 between neighbouring positions.
MIN_SPREAD = 0.0025
MAX_OFFSET = 0.1


def calibrate(count=5000):
    """The least spread and the largest offset of drawn objects, and the share of drawn scenes the
    check passes (it must be 1.0)."""
    spread, offset, passed = 1.0, 0.0, 0
    for i in range(count):
        scene = scene_for(0, 3, i)
        pixels = np.asarray(draw(scene))
        m = measure(pixels, scene["caption"])
        spread = min([spread] + [o["spread"] for o in m["objects"]])
        offset = max([offset] + [o["offset"] for o in m["objects"] if o["offset"] is not None])
        passed += check(pixels, scene["caption"])["ok"]
    return {"scenes": count, "least_spread": round(spread, 4), "largest_offset": round(offset, 4), "passed": passed / count}


if __name__ == "__main__":
    import json
    print(json.dumps(calibrate()))
