#!/usr/bin/env python3
"""Reload one step of a running tritonserver in place, e.g. `rerank_engine` after its stub process died.

Triton 2.51 keeps a model with a dead Python stub READY and a plain `load` of unchanged files is a no-op, while
`unload` + `load` takes the `reranker` ensemble down with it until the step is back (NOT_FOUND for every request).
A `load` whose configuration differs is done in place: Triton starts new instances beside the old ones and swaps
them in when ready, and the ensemble is never unloaded. This sends the served configuration back with one
parameter changed (`reload_nonce`, read by no step). Needs `--model-control-mode=explicit` (scripts/start_server.sh).

    python scripts/recover_engine.py --url localhost:8000 [--model rerank_engine]   # exit 0 once reloaded
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request


def reload_in_place(http_url: str, model: str = "rerank_engine", timeout_s: float = 900) -> float:
    """Seconds the reload took; raises urllib.error.HTTPError with Triton's message when it fails."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{model}/config", timeout=30) as response:
        config = json.load(response)
    config.setdefault("parameters", {})["reload_nonce"] = {"string_value": repr(time.time())}
    body = json.dumps({"parameters": {"config": json.dumps(config)}}).encode()
    request = urllib.request.Request(
        f"http://{http_url}/v2/repository/models/{model}/load", data=body, method="POST",
        headers={"Content-Type": "application/json"},
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=timeout_s):
        return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8000", help="Triton's HTTP address")
    parser.add_argument("--model", default="rerank_engine")
    args = parser.parse_args(argv)
    try:
        seconds = reload_in_place(args.url, args.model)
    except OSError as exc:
        print(f"reload of {args.model} failed: {exc}", file=sys.stderr)
        return 1
    print(f"{args.model} reloaded in place in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
