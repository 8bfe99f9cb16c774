"""transformers references for @dtorch/hf's AutoTokenizer: CLIP (BPE) and T5 (Unigram) tokenizer
folders in the layouts found on the hub, and what transformers' AutoTokenizer makes of them.

Run from the repository root with the setup's Python (transformers, tokenizers, sentencepiece,
protobuf; open_clip_torch for CLIP's vocabulary):
    .venv/bin/python tools/reference/make_tokenizer_fixtures.py
Writes packages/hf/assets/tiny-tokenizers/ (the built-in tiny pipelines' tokenizers, shipped in
the package; the tests read them there, so they are stored once):
  clip/                    slow-only CLIP-L folder as openai/clip-vit-large-patch14 ships it
                           (AddedToken dicts with "__type"; pads with <|endoftext|>): CLIP's real
                           vocabulary (49408 tokens, 48894 merges), built from open_clip's
                           bpe_simple_vocab_16e6.txt.gz as open_clip's SimpleTokenizer builds it
  t5/                      slow-only T5 folder as google/t5-v1_1-* ships it: spiece.model trained
                           here with sentencepiece (unigram, 1500 pieces, pad=0 eos=1 unk=2) on the
                           METADATA/LICENSE texts of the installed packages, + 100 <extra_id_N>
and tests/fixtures/hf/tokenizers/ (large files gzipped; the tests gunzip them), the fixture folders
clip-l (= the tiny clip), t5 (= the tiny t5) and:
  clip-g/                  slow-only CLIP-G folder as SDXL's / SD3's tokenizer_2 (v4 save_pretrained,
                           added_tokens_decoder; pads with "!"), CLIP's vocabulary from the tiny clip
  clip-l-fast/             clip-l written by this transformers' save_pretrained (tokenizer.json)
  clip-g-fast/             clip-g with a tokenizer.json as transformers v4's CLIPConverter wrote it
                           (older pre-tokenizer regex, merges as "a b" strings)
  t5-fast/                 t5 written by this transformers' save_pretrained
  t5-hub/                  t5 with a tokenizer.json as transformers v4's T5Converter wrote it, and a v4
                           tokenizer_config.json (SD3's tokenizer_3 / Flux's tokenizer_2 layout)
  t5-left/                 t5-fast with padding_side and truncation_side "left"
  folders.json             each folder's files: {folder: {file name: path from this folder}}
  converted.json.gz        for the slow-only folders, the tokenizer transformers builds
                           (backend_tokenizer.to_str(); CLIP's vocab and merges left out, T5's
                           precompiled_charsmap as its sha256)
  expected.json.gz         the strings, then per folder its attributes, the ids and attention masks
                           of tokenizer(strings, **options) for several options, and decode() of them
Python's AutoTokenizer reads each folder exactly as the tests assemble it from folders.json.
"""
import base64
import glob
import hashlib
import gzip
import io
import json
import os
import pathlib
import random
import shutil
import sys
import tempfile

import sentencepiece as spm
import transformers
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from transformers import AutoTokenizer
from transformers.convert_slow_tokenizer import bytes_to_unicode

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/fixtures/hf/tokenizers"
TINY = ROOT / "packages/hf/assets/tiny-tokenizers"
SITE = pathlib.Path(transformers.__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------
# the test strings


def test_strings():
    fixed = [
        "",
        " ",
        "a photo of a cat",
        "A Photo Of A CAT",
        "a photo of an astronaut riding a horse on mars, highly detailed, 8k, trending on artstation",
        "Hello, World!",
        "hello world",
        "HELLO WORLD",
        "hElLo WoRlD",
        "café",
        "cafe\u0301",
        "naïve résumé",
        "Ångström and Øresund",
        "crème brûlée à la française",
        "Zoë Saldaña, São Paulo, Kraków, İstanbul",
        "straße STRASSE",
        "ǅungla ǈ ǋ",
        "🐱",
        "I ❤️ NY",
        "👨‍👩‍👧‍👦 family emoji",
        "🇯🇵🇫🇷 flags",
        "smile 😀😃😄😁 laugh 🤣",
        "a cat 🐈 on a mat",
        "日本語のテキスト",
        "東京 Tokyo 2024",
        "中文测试，标点符号。",
        "한국어 문장입니다",
        "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
        "half-width ｶﾀｶﾅ",
        "Привет, мир!",
        "Καλημέρα κόσμε",
        "مرحبا بالعالم",
        "שלום עולם",
        "สวัสดีชาวโลก",
        "नमस्ते दुनिया",
        "  leading spaces",
        "trailing spaces   ",
        "a    b     c",
        "\ttab first",
        "tab\tin\tthe\tmiddle",
        "line1\nline2\nline3",
        "windows\r\nline ending",
        "\n\n\n",
        "\t \n \r ",
        "non\u00a0breaking\u00a0space",
        "ideographic\u3000space",
        "thin\u2009space and\u200bzero width",
        "\ufeffbyte order mark",
        "combining \u0301 alone",
        "control \x00 \x07 \x1b chars",
        "&amp;",
        "Tom &amp; Jerry",
        "&lt;b&gt;bold&lt;/b&gt;",
        "&quot;quoted&quot; and &#39;single&#39;",
        "AT&T and R&D",
        "<b>html</b> <br/> <div class=\"x\">",
        "don't stop",
        "it's we're they've I'm you'll he'd",
        "DON'T IT'S",
        "rock 'n' roll",
        "...",
        "?!?!",
        "Wait... what?!",
        "(parenthetical) [brackets] {braces} <angles>",
        "email@example.com",
        "https://example.com/path?q=1&b=2#frag",
        "C++ / C# / F#",
        "snake_case_name and kebab-case-name and camelCaseName",
        "#hashtag @mention $dollar %percent ^caret *star",
        "~tilde `backtick` |pipe| \\backslash/",
        "12345",
        "3.14159",
        "1,000,000",
        "2024-01-01T12:34:56Z",
        "v1.2.3-beta.4",
        "0x1F 0b1010 1e-5",
        "room 101, floor 7",
        "The year 1999 and 2000",
        "<|startoftext|>",
        "<|endoftext|>",
        "<|startoftext|>a photo<|endoftext|>",
        "<|ENDOFTEXT|> <|StartOfText|>",
        "</s>",
        "<pad> <unk> </s>",
        "hello </s> world",
        "<extra_id_0>",
        "<extra_id_0> masked <extra_id_1> span <extra_id_99>",
        "<EXTRA_ID_0>",
        "!",
        "!!!",
        "a!b!c!",
        "wow!!! amazing!!!",
        "Mr. Smith went to Washington.",
        "The quick brown fox jumps over the lazy dog.",
        "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
        "Pack my box with five dozen liquor jugs",
        "a" * 300,
        "ab" * 200,
        " ".join(["cat"] * 120),
        " ".join(str(i) for i in range(150)),
        "word " * 90,
        "🐱" * 100,
        "日本" * 80,
        "!" * 150,
        ". " * 100,
    ]
    long_text = (
        "In a quiet village nestled between rolling hills and ancient forests, there lived an old "
        "clockmaker who spent his days repairing timepieces for the townsfolk. Every morning he would "
        "open the wooden shutters of his small shop, brew a pot of strong black tea, and sit at his "
        "workbench surrounded by gears, springs, and tiny screws. "
    )
    fixed += [long_text, long_text * 3, long_text.upper(), long_text.replace(" ", "  ")]

    # generated: words from several scripts with random case, punctuation and whitespace runs
    rng = random.Random(1234)
    words = (
        "photo cat dog astronaut horse castle sunset mountain river forest portrait painting oil "
        "watercolor cinematic lighting detailed octane render 4k 8k hdr bokeh café naïve über "
        "東京 猫 犬 山 川 こんにちは Москва кошка λόγος ñandú façade smörgåsbord 😀 🐶 🌸 ✨ 🔥"
    ).split()
    punct = [",", ".", "!", "?", ";", ":", "-", "(", ")", "'s", "&amp;", "...", "/", "\"", "#", "%"]
    spaces = [" ", " ", " ", "  ", "\t", "\n", " \n ", "   "]
    while len(fixed) < 240:
        n = rng.randint(1, 40)
        parts = []
        for _ in range(n):
            w = rng.choice(words)
            r = rng.random()
            if r < 0.15:
                w = w.upper()
            elif r < 0.3:
                w = w.capitalize()
            if rng.random() < 0.2:
                w += rng.choice(punct)
            if rng.random() < 0.1:
                w = str(rng.randint(0, 10**rng.randint(1, 6))) + " " + w
            parts.append(w)
            parts.append(rng.choice(spaces))
        text = "".join(parts)
        if rng.random() < 0.5:
            text = text.strip()
        fixed.append(text)
    return fixed


# ---------------------------------------------------------------------------------------------
# CLIP folders


def added(content, normalized, special=None, typed=False):
    token = {"content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": normalized}
    if special is not None:
        token["special"] = special
    if typed:
        token["__type"] = "AddedToken"
    return token


def clip_vocabulary():
    """vocab.json and merges.txt of CLIP, as open_clip's SimpleTokenizer builds its vocabulary."""
    bpe = gzip.open(SITE / "open_clip/bpe_simple_vocab_16e6.txt.gz").read().decode("utf-8").split("\n")
    merges = bpe[1 : 49152 - 256 - 2 + 1]
    vocab = list(bytes_to_unicode().values())
    vocab = vocab + [v + "</w>" for v in vocab]
    vocab += ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    assert len(vocab) == 49408 and len(merges) == 48894
    vocab_json = json.dumps({token: i for i, token in enumerate(vocab)}, ensure_ascii=False)
    merges_txt = "#version: 0.2\n" + "\n".join(merges) + "\n"
    return vocab_json, merges_txt


# openai/clip-vit-large-patch14's tokenizer_config.json and special_tokens_map.json
CLIP_L_CONFIG = {
    "unk_token": added("<|endoftext|>", True, typed=True),
    "bos_token": added("<|startoftext|>", True, typed=True),
    "eos_token": added("<|endoftext|>", True, typed=True),
    "pad_token": "<|endoftext|>",
    "add_prefix_space": False,
    "errors": "replace",
    "do_lower_case": True,
    "name_or_path": "openai/clip-vit-large-patch14",
    "model_max_length": 77,
    "special_tokens_map_file": "./special_tokens_map.json",
    "tokenizer_class": "CLIPTokenizer",
}
CLIP_L_SPECIAL = {
    "bos_token": added("<|startoftext|>", True),
    "eos_token": added("<|endoftext|>", True),
    "unk_token": added("<|endoftext|>", True),
    "pad_token": "<|endoftext|>",
}
# SDXL's and SD3's tokenizer_2 (OpenCLIP ViT-bigG), written by transformers v4's save_pretrained
CLIP_G_CONFIG = {
    "add_prefix_space": False,
    "added_tokens_decoder": {
        "0": added("!", False, special=True),
        "49406": added("<|startoftext|>", True, special=True),
        "49407": added("<|endoftext|>", False, special=True),
    },
    "bos_token": "<|startoftext|>",
    "clean_up_tokenization_spaces": True,
    "do_lower_case": True,
    "eos_token": "<|endoftext|>",
    "errors": "replace",
    "model_max_length": 77,
    "pad_token": "!",
    "tokenizer_class": "CLIPTokenizer",
    "unk_token": "<|endoftext|>",
}
CLIP_G_SPECIAL = {
    "bos_token": added("<|startoftext|>", True),
    "eos_token": added("<|endoftext|>", False),
    "pad_token": added("!", False),
    "unk_token": added("<|endoftext|>", False),
}


def clip_v4_tokenizer_json(vocab_json, merges_txt):
    """tokenizer.json as transformers v4's CLIPConverter wrote it (the regex without the special
    tokens; merges serialized as "a b" strings, as tokenizers < 0.20 did)."""
    vocab = json.loads(vocab_json)
    merges = [tuple(line.split(" ")) for line in merges_txt.splitlines() if line and not line.startswith("#")]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, dropout=None, continuing_subword_prefix="",
                        end_of_word_suffix="</w>", fuse_unk=False, unk_token="<|endoftext|>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.RobertaProcessing(("<|endoftext|>", 49407), ("<|startoftext|>", 49406), False, False)
    from tokenizers import AddedToken
    tok.add_tokens([AddedToken("!", special=True, normalized=False),
                    AddedToken("<|startoftext|>", special=True, normalized=True),
                    AddedToken("<|endoftext|>", special=True, normalized=False)])
    data = json.loads(tok.to_str())
    data["model"]["merges"] = [" ".join(pair) for pair in data["model"]["merges"]]
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# T5 folders


def t5_sentencepiece_model():
    """A unigram sentencepiece model with T5's special ids, trained on local text."""
    files = sorted(glob.glob(str(SITE / "*.dist-info/METADATA"))) + sorted(glob.glob(str(SITE / "*.dist-info/LICENSE*")))
    lines = []
    for f in files:
        lines += [line.strip() for line in open(f, encoding="utf-8", errors="replace") if line.strip()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=1500, model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1, pad_piece="<pad>", eos_piece="</s>", unk_piece="<unk>",
        character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


EXTRA_IDS = [f"<extra_id_{i}>" for i in range(100)]
# google/t5-v1_1-xxl's tokenizer_config.json and special_tokens_map.json
T5_CONFIG = {
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "extra_ids": 100,
    "additional_special_tokens": EXTRA_IDS,
    "model_max_length": 512,
    "name_or_path": "google/t5-v1_1-xxl",
    "sp_model_kwargs": {},
    "tokenizer_class": "T5Tokenizer",
}
T5_SPECIAL = {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>", "additional_special_tokens": EXTRA_IDS}


def t5_v4_files(fast_json):
    """tokenizer.json as transformers v4's T5Converter wrote it, and a v4 tokenizer_config.json
    (as in SD3's tokenizer_3): Precompiled + collapse of space runs, a Metaspace pre-tokenizer."""
    data = json.loads(fast_json)
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        data["normalizer"], {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    data["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}
    vocab_size = len(data["model"]["vocab"])
    decoder = {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in data["added_tokens"]}
    config = {
        "added_tokens_decoder": decoder,
        "additional_special_tokens": EXTRA_IDS,
        "clean_up_tokenization_spaces": True,
        "eos_token": "</s>",
        "extra_ids": 100,
        "legacy": True,
        "model_max_length": 512,
        "pad_token": "<pad>",
        "sp_model_kwargs": {},
        "tokenizer_class": "T5Tokenizer",
        "unk_token": "<unk>",
    }
    assert vocab_size == 1600
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")), config


# ---------------------------------------------------------------------------------------------
# writing and reading the fixture set


class Fixtures:
    def __init__(self, out):
        self.out = out
        self.folders = {}

    def write(self, folder, name, data, compress=False, into=None):
        """Writes one file of `folder` (bytes or str) under `folder/`, or into the folder `into`
        (a tiny tokenizer of the package, which the fixture folder is)."""
        data = data.encode("utf-8") if isinstance(data, str) else data
        path = (into or self.out / folder) / (name + (".gz" if compress else ""))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(data, 9, mtime=0) if compress else data)
        self.folders.setdefault(folder, {})[name] = os.path.relpath(path, self.out)

    def use(self, folder, name, other):
        self.folders.setdefault(folder, {})[name] = self.folders[other][name]

    def materialize(self, folder, into):
        """The folder as the tests build it: fixture files copied, .gz ones gunzipped."""
        target = into / folder
        target.mkdir(parents=True)
        for name, rel in self.folders[folder].items():
            data = (self.out / rel).read_bytes()
            (target / name).write_bytes(gzip.decompress(data) if rel.endswith(".gz") else data)
        return target


def dump(value):
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def python_options(options):
    names = {"padding": "padding", "maxLength": "max_length", "truncation": "truncation", "addSpecialTokens": "add_special_tokens"}
    return {names[k]: v for k, v in options.items()}


CLIP_CASES = [
    {"options": {"padding": "max_length", "maxLength": 77, "truncation": True}},
    {"options": {}},
    {"options": {"truncation": True}},
    {"options": {"padding": "max_length"}},
    {"options": {"padding": "max_length", "truncation": True}},
    {"options": {"padding": "longest", "truncation": True, "maxLength": 16}, "batch": 8},
    {"options": {"padding": "longest"}, "batch": 8},
    {"options": {"addSpecialTokens": False, "truncation": True, "maxLength": 10}},
    {"options": {"maxLength": 2}},
    {"options": {"maxLength": 3, "padding": "max_length", "truncation": True}},
]
T5_CASES = [
    {"options": {"padding": "max_length", "maxLength": 64, "truncation": True}},
    {"options": {}},
    {"options": {"padding": "longest", "truncation": True, "maxLength": 64}, "batch": 8},
    {"options": {"padding": "longest"}, "batch": 8},
    {"options": {"truncation": True}},
    {"options": {"padding": "max_length", "maxLength": 64}},
    {"options": {"addSpecialTokens": False}},
    {"options": {"maxLength": 1}},
    {"options": {"padding": True, "truncation": True, "maxLength": 24}, "batch": 5},
]


def reference(tok, strings, cases, results):
    """Python's encode and decode of `strings` for each case; results deduplicated into `results`."""

    def keep(value):
        key = json.dumps(value, ensure_ascii=False)
        index = results["index"].setdefault(key, len(results["values"]))
        if index == len(results["values"]):
            results["values"].append(value)
        return index

    attributes = {
        "modelMaxLength": tok.model_max_length if tok.model_max_length < 1e20 else None,
        "padToken": tok.pad_token,
        "padTokenId": tok.pad_token_id,
        "eosTokenId": tok.eos_token_id,
        "bosTokenId": tok.bos_token_id,
        "vocabSize": tok.vocab_size,
        "length": len(tok),
    }
    encoded = []
    for case in cases:
        batch = case.get("batch", len(strings))
        ids, mask = [], []
        for start in range(0, len(strings), batch):
            out = tok(strings[start : start + batch], **python_options(case["options"]))
            ids += out["input_ids"]
            mask += out["attention_mask"]
        encoded.append({**case, "inputIds": keep(ids), "attentionMask": keep(mask)})
    decoded = []
    # decode what the default call (index 1) and the padded call (index 0) gave, both ways
    for source in (1, 0):
        ids = results["values"][encoded[source]["inputIds"]]
        for skip in (False, True):
            texts = [tok.decode(row, skip_special_tokens=skip) for row in ids]
            decoded.append({"case": source, "skipSpecialTokens": skip, "texts": keep(texts)})
    return {"attributes": attributes, "encode": encoded, "decode": decoded}


def main():
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    fx = Fixtures(OUT)
    strings = test_strings()

    vocab_json, merges_txt = clip_vocabulary()
    fx.write("clip-l", "vocab.json", vocab_json, compress=True, into=TINY / "clip")
    fx.write("clip-l", "merges.txt", merges_txt, compress=True, into=TINY / "clip")
    fx.write("clip-l", "tokenizer_config.json", dump(CLIP_L_CONFIG), into=TINY / "clip")
    fx.write("clip-l", "special_tokens_map.json", dump(CLIP_L_SPECIAL), into=TINY / "clip")
    for name in ("vocab.json", "merges.txt"):
        fx.use("clip-g", name, "clip-l")
    fx.write("clip-g", "tokenizer_config.json", dump(CLIP_G_CONFIG))
    fx.write("clip-g", "special_tokens_map.json", dump(CLIP_G_SPECIAL))

    fx.write("t5", "spiece.model", t5_sentencepiece_model(), compress=True, into=TINY / "t5")
    fx.write("t5", "tokenizer_config.json", dump(T5_CONFIG), into=TINY / "t5")
    fx.write("t5", "special_tokens_map.json", dump(T5_SPECIAL), into=TINY / "t5")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        converted = {}
        # the fast folders: save_pretrained of the slow ones
        for slow, fast in (("clip-l", "clip-l-fast"), ("t5", "t5-fast")):
            tok = AutoTokenizer.from_pretrained(str(fx.materialize(slow, tmp / "slow")))
            converted[slow] = json.loads(tok.backend_tokenizer.to_str())
            tok.save_pretrained(str(tmp / "saved" / fast))
            fx.write(fast, "tokenizer.json", (tmp / "saved" / fast / "tokenizer.json").read_bytes(), compress=True)
            fx.write(fast, "tokenizer_config.json", (tmp / "saved" / fast / "tokenizer_config.json").read_bytes())
        tok = AutoTokenizer.from_pretrained(str(fx.materialize("clip-g", tmp / "slow")))
        converted["clip-g"] = json.loads(tok.backend_tokenizer.to_str())
        for data in (converted["clip-l"], converted["clip-g"]):
            data["model"]["vocab"], data["model"]["merges"] = {}, []  # as vocab.json / merges.txt say
        charsmap = converted["t5"]["normalizer"]
        charsmap["precompiled_charsmap"] = "sha256:" + hashlib.sha256(base64.b64decode(charsmap["precompiled_charsmap"])).hexdigest()

        fx.write("clip-g-fast", "tokenizer.json", clip_v4_tokenizer_json(vocab_json, merges_txt), compress=True)
        fx.write("clip-g-fast", "tokenizer_config.json", dump(CLIP_G_CONFIG))
        fx.write("clip-g-fast", "special_tokens_map.json", dump(CLIP_G_SPECIAL))

        t5_fast_json = gzip.decompress((OUT / fx.folders["t5-fast"]["tokenizer.json"]).read_bytes()).decode("utf-8")
        hub_json, hub_config = t5_v4_files(t5_fast_json)
        fx.use("t5-hub", "spiece.model", "t5")
        fx.write("t5-hub", "tokenizer.json", hub_json, compress=True)
        fx.write("t5-hub", "tokenizer_config.json", dump(hub_config))
        fx.use("t5-hub", "special_tokens_map.json", "t5")

        fx.use("t5-left", "tokenizer.json", "t5-fast")
        left = json.loads((OUT / fx.folders["t5-fast"]["tokenizer_config.json"]).read_text())
        left.update(padding_side="left", truncation_side="left")
        fx.write("t5-left", "tokenizer_config.json", dump(left))

        results = {"index": {}, "values": []}
        folders = {}
        for folder in fx.folders:
            cases = CLIP_CASES if folder.startswith("clip") else T5_CASES
            tok = AutoTokenizer.from_pretrained(str(fx.materialize(folder, tmp / "check")))
            folders[folder] = reference(tok, strings, cases, results)
            print(f"{folder}: {type(tok).__name__}, {len(tok)} tokens, {len(strings)} strings x {len(cases)} calls")

    (OUT / "folders.json").write_text(dump(fx.folders))
    (OUT / "converted.json.gz").write_bytes(gzip.compress(json.dumps(converted, ensure_ascii=False).encode("utf-8"), 9, mtime=0))
    expected = {"transformers": transformers.__version__, "strings": strings, "folders": folders, "values": results["values"]}
    (OUT / "expected.json.gz").write_bytes(gzip.compress(json.dumps(expected, ensure_ascii=False).encode("utf-8"), 9, mtime=0))
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT.relative_to(ROOT)}: {total / 1e6:.2f} MB")


if __name__ == "__main__":
    sys.exit(main())
