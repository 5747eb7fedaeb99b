#!/usr/bin/env python3
"""Bring one step of a running tritonserver back, e.g. `rerank_engine` after its stub process died.

The repository index says what state the step is in:
- READY (Triton 2.51 keeps a model with a dead Python stub READY): reloaded in place. A plain `load` of unchanged
  files is a no-op, and `unload` + `load` takes the `reranker` ensemble down with it until the step is back
  (NOT_FOUND for every request); a `load` whose configuration differs is done in place: Triton starts new instances
  beside the old ones and swaps them in when ready, and the ensemble is never unloaded. So the served configuration
  is sent back with one parameter changed (`reload_nonce`, read by no step).
- not loaded (Triton unloaded it, e.g. when its first request killed an engine that cannot run the model, and the
  ensembles that use it with it): loaded from the repository's files, then each ensemble of --ensemble that is not
  READY. A load that fails prints Triton's reason (the step's own error) and exits 1.
Needs `--model-control-mode=explicit` (scripts/start_server.sh) and the server's admin key, since the
model-repository API is restricted to callers that send it (header `admin-key`): --admin-key-file, else
TRITON_ADMIN_KEY, else the build/admin-key that scripts/start_server.sh generates.

    python scripts/recover_engine.py --url localhost:8000 [--model rerank_engine]   # exit 0 once it serves again
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import os
import urllib.error
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


def _post(http_url: str, path: str, key: str, body: dict, timeout_s: float) -> bytes:
    request = urllib.request.Request(f"http://{http_url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", ADMIN_KEY_HEADER: key})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return response.read()


def repository_index(http_url: str, key: str) -> dict[str, dict]:
    """Every model of the repository by name, with its state ("READY", "UNAVAILABLE", ...) and Triton's reason."""
    return {entry["name"]: entry for entry in json.loads(_post(http_url, "/v2/repository/index", key, {}, 30))}


def reload_in_place(http_url: str, key: str, model: str = "rerank_engine", timeout_s: float = 900) -> float:
    """Seconds the reload of a loaded model took; raises urllib.error.HTTPError with Triton's message when it fails."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{model}/config", timeout=30) as response:
        config = json.load(response)
    config.setdefault("parameters", {})["reload_nonce"] = {"string_value": repr(time.time())}
    return load(http_url, key, model, {"parameters": {"config": json.dumps(config)}}, timeout_s)


def load(http_url: str, key: str, model: str, body: dict | None = None, timeout_s: float = 900) -> float:
    """Seconds Triton's load of `model` took: with `body`'s config, else from the repository's files."""
    started = time.monotonic()
    _post(http_url, f"/v2/repository/models/{model}/load", key, body or {}, timeout_s)
    return time.monotonic() - started


def recover(http_url: str, key: str, model: str, ensembles: list[str]) -> list[str]:
    """What was done, a line each; raises urllib.error.HTTPError (Triton's reason in its body) when a load fails."""
    index = repository_index(http_url, key)
    if model not in index:
        raise SystemExit(f"{model} is not in the server's model repository (it has: {', '.join(sorted(index))})")
    if index[model].get("state") == "READY":
        return [f"{model} reloaded in place in {reload_in_place(http_url, key, model):.1f} s"]
    lines = [f"{model} was not loaded ({index[model].get('state', 'no state')}: {index[model].get('reason') or '-'}); "
             f"loaded from the repository in {load(http_url, key, model):.1f} s"]
    for ensemble in ensembles:
        if ensemble in index and index[ensemble].get("state") != "READY":
            lines.append(f"{ensemble} loaded in {load(http_url, key, ensemble):.1f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8000", help="Triton's HTTP address")
    parser.add_argument("--model", default="rerank_engine")
    parser.add_argument("--ensemble", action="append", default=None,
                        help="an ensemble to load again when it is not READY (default: reranker); repeatable")
    parser.add_argument("--admin-key-file", type=Path, help="file holding the server's admin key")
    args = parser.parse_args(argv)
    try:
        print("\n".join(recover(args.url, admin_key(args.admin_key_file), args.model, args.ensemble or ["reranker"])))
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode(errors="replace")
        print(f"recovery of {args.model} failed: HTTP {exc.code}: {json_error(reason)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"recovery of {args.model} failed: {exc}", file=sys.stderr)
        return 1
    return 0


def json_error(body: str) -> str:
    """Triton's {"error": "..."} body as its message; any other body as it is."""
    try:
        return json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return body


if __name__ == "__main__":
    sys.exit(main())
