"""A checkpoint's weights, checked without loading them: every safetensors file the checkpoint names is there, its
header is whole and its tensors cover the file exactly (the safetensors library's own checks, on a memory map), so a
missing, truncated or corrupt file is refused by `check` with its name instead of failing inside vLLM's load.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
PICKLED = ("pytorch_model.bin", "pytorch_model.bin.index.json")  # loaded by vLLM too, not checked here


class BrokenWeights(ValueError):
    """Weights that cannot load; the message names the file and the problem."""


@dataclass(frozen=True)
class Weights:
    files: tuple[str, ...]  # the safetensors files, () for a checkpoint of pickled weights
    parameters: int | None  # None: not read (pickled weights)


def checked_weights(folder: str) -> Weights:
    """The checkpoint's safetensors files (sharded by an index, or one file), each opened and checked."""
    root = Path(folder)
    if (root / INDEX).is_file():
        files = _indexed(root / INDEX)
    elif (root / SINGLE).is_file():
        files = [SINGLE]
    elif any((root / name).is_file() for name in PICKLED):
        return Weights((), None)
    else:
        raise BrokenWeights(f"{folder}: no weights ({SINGLE}, {INDEX} or {PICKLED[0]})")
    return Weights(tuple(files), sum(_parameters(root / name) for name in files))


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


def _parameters(path: Path) -> int:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="numpy") as handle:
            return sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())
    except SafetensorError as problem:
        raise BrokenWeights(f"{path}: not a whole safetensors file ({problem})") from None
