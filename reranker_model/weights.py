"""A checkpoint's weights, checked without loading them: every safetensors file the checkpoint names is there, its
header is whole and its tensors cover the file exactly (the safetensors library's own checks, on a memory map), so a
missing, truncated or corrupt file is refused by `check` with its name instead of failing inside vLLM's load; and the
headers' shapes agree with config.json's sizes (the token embedding's width, the layer count), so weights saved from
another model's config are refused by name before vLLM fails to load them into parameters of other shapes.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")  # loaded by vLLM too, not checked here
EMBEDDINGS = ("word_embeddings.weight", "embed_tokens.weight")  # the token embedding: [vocab, hidden_size]
LAYER = re.compile(r"\.layers?\.(\d+)\.")  # encoder.layer.N. (BERT, XLM-R), model.layers.N. (Qwen3)


class BrokenWeights(ValueError):
    """Weights that cannot load; the message names the file and the problem."""


@dataclass(frozen=True)
class Weights:
    files: tuple[str, ...]  # the safetensors files, () for a checkpoint of pickled weights
    parameters: int | None  # None: not read (pickled weights)


def checked_weights(folder: str, config: dict | None = None) -> Weights:
    """The checkpoint's safetensors files (sharded by an index, or one file), each opened and checked, their shapes
    against `config` (config.json) where given."""
    root = Path(folder)
    if (root / INDEX).is_file():
        files = _indexed(root / INDEX)
    elif (root / SINGLE).is_file():
        files = [SINGLE]
    elif any((root / name).is_file() for name in PICKLED):
        return Weights((), None)
    else:
        raise BrokenWeights(f"{folder}: no weights ({SINGLE}, {INDEX} or {PICKLED[0]})")
    shapes = {name: shape for file in files for name, shape in _shapes(root / file).items()}
    if config:
        _check_sizes(folder, shapes, config)
    return Weights(tuple(files), sum(math.prod(shape) for shape in shapes.values()))


def _check_sizes(folder: str, shapes: dict[str, list[int]], config: dict) -> None:
    hidden, layers = config.get("hidden_size"), config.get("num_hidden_layers")
    for name, shape in shapes.items():
        if name.endswith(EMBEDDINGS) and hidden and shape[-1:] != [hidden]:
            raise BrokenWeights(f"{folder}: tensor {name} is {shape}, config.json's hidden_size is {hidden}: the "
                                "weights were saved from a model of another size than config.json describes")
    found = {int(match.group(1)) for name in shapes if (match := LAYER.search(name))}
    if found and layers and len(found) != layers:
        raise BrokenWeights(f"{folder}: the weights hold {len(found)} layers, config.json's num_hidden_layers is "
                            f"{layers}: the weights were saved from a model of another size than config.json describes")


def _indexed(index: Path) -> list[str]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        files = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise BrokenWeights(f"{index}: not a safetensors index (a JSON object whose weight_map maps tensors to files)") from None
    missing = [name for name in files if not (index.parent / name).is_file()]
    if missing:
        raise BrokenWeights(f"{index}: names {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
                            "in the folder")
    return files


def _shapes(path: Path) -> dict[str, list[int]]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="numpy") as handle:
            return {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}
    except SafetensorError as problem:
        raise BrokenWeights(f"{path}: not a whole safetensors file ({problem})") from None
