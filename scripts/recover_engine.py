#!/usr/bin/env python3
"""Reload one step of a running tritonserver in place, e.g. `rerank_engine` after its stub process died.

Triton 2.51 keeps a model with a dead Python stub READY and a plain `load` of unchanged files is a no-op, while
`unload` + `load` takes the `reranker` ensemble down with it until the step is back (NOT_FOUND for every request).
A `load` whose configuration differs is done in place: Triton starts new instances beside the old ones and swaps
them in when ready, and the ensemble is never unloaded. This sends the served configuration back with one
parameter changed (`reload_nonce`, read by no step). Needs `--model-control-mode=explicit` (scripts/start_server.sh)
and the server's admin key, since the model-repository API is restricted to callers that send it (header `admin-key`):
--admin-key-file, else TRITON_ADMIN_KEY, else the build/admin-key that scripts/start_server.sh generates.

    python scripts/recover_engine.py --url localhost:8000 [--model rerank_engine]   # exit 0 once reloaded
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import os
import urllib.request
from pathlib import Path

ADMIN_KEY_HEADER = "admin-key"
DEFAULT_KEY_FILE = Path(__file__).resolve().parent.parent / "build" / "admin-key"


def admin_key(key_file: Path | None = None) -> str:
    """The key of the restricted control APIs: an explicit file, else TRITON_ADMIN_KEY, else start_server.sh's file."""
    if key_file is None and os.environ.get("TRITON_ADMIN_KEY"):
        return os.environ["TRITON_ADMIN_KEY"]
    path = key_file or DEFAULT_KEY_FILE
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise SystemExit(f"no admin key: set TRITON_ADMIN_KEY or pass --admin-key-file ({exc})") from exc


def reload_in_place(http_url: str, key: str, model: str = "rerank_engine", timeout_s: float = 900) -> float:
    """Seconds the reload took; raises urllib.error.HTTPError with Triton's message when it fails."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{model}/config", timeout=30) as response:
        config = json.load(response)
    config.setdefault("parameters", {})["reload_nonce"] = {"string_value": repr(time.time())}
    body = json.dumps({"parameters": {"config": json.dumps(config)}}).encode()
    request = urllib.request.Request(
        f"http://{http_url}/v2/repository/models/{model}/load", data=body, method="POST",
        headers={"Content-Type": "application/json", ADMIN_KEY_HEADER: key},
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=timeout_s):
        return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8000", help="Triton's HTTP address")
    parser.add_argument("--model", default="rerank_engine")
    parser.add_argument("--admin-key-file", type=Path, help="file holding the server's admin key")
    args = parser.parse_args(argv)
    try:
        seconds = reload_in_place(args.url, admin_key(args.admin_key_file), args.model)
    except OSError as exc:
        print(f"reload of {args.model} failed: {exc}", file=sys.stderr)
        return 1
    print(f"{args.model} reloaded in place in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
