"""A two-document request behind one maximal request on the CPU server, against the fairness target.

Starts the server from this checkout's model_repository and measures, in one run: the small request alone (median of
5), one engine step (a request of max_num_batched_tokens), the maximal request (1024 x 64 KB documents) alone, and
the small request sent once vLLM holds the maximal one's sequences, with the maximal request's own time. The target
is 3 x the small request alone + one step. Printed as a table and written as JSON:

    .venv/bin/python -m benchmarks.fairness --out benchmarks/results/cpu-fairness.json

`--before <commit>` first runs that commit's model_repository and `python_backends` (as benchmarks.maximal_burst
does), then this checkout's, and writes both.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from benchmarks.maximal_burst import old_checkout
from tests.support.fairness import MAXIMAL, ONE_STEP, SMALL, held, in_background, rerank, small_solo_s
from tests.support.triton_server import ROOT, start_server, stop_server
from tests.support.waiting import wait_until


def scenario(server) -> dict:
    solo = small_solo_s(server)
    step_outcome, step = rerank(server, "budget", ONE_STEP)
    alone_outcome, maximal_alone = rerank(server, "budget", MAXIMAL)
    maximal, answers = in_background(lambda: rerank(server, "budget", MAXIMAL))
    if not wait_until(lambda: held(server) > 0, 60, poll_s=0.2):
        raise RuntimeError("the maximal request never reached vLLM")
    small_outcome, behind = rerank(server, *SMALL)
    maximal.join()
    return {
        "small_alone_s": round(solo, 3), "one_step_request_s": round(step, 2), "one_step_outcome": step_outcome[:40],
        "maximal_alone_s": round(maximal_alone, 1), "maximal_alone_outcome": alone_outcome[:40],
        "small_behind_maximal_s": round(behind, 2), "small_outcome": small_outcome,
        "maximal_beside_small_s": round(answers[0][1], 1), "maximal_outcome": answers[0][0][:40],
        "target_s": round(3 * solo + step, 2),
    }


def run(repository: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "server.log", model_repository=repository.resolve())
        try:
            return scenario(server)
        finally:
            stop_server(server)


def table(results: dict[str, dict]) -> str:
    columns = ("small_alone_s", "one_step_request_s", "small_behind_maximal_s", "target_s", "maximal_alone_s",
               "maximal_beside_small_s")
    rows = ["| | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    rows += [f"| {name} | " + " | ".join(str(result[c]) for c in columns) + " |" for name, result in results.items()]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--before", help="commit whose repository and package run first, for a before/after table")
    args = parser.parse_args(argv)
    results = {}
    if args.before:
        with tempfile.TemporaryDirectory() as old:
            results[f"before ({args.before})"] = run(old_checkout(args.before, Path(old)))
    results["now"] = run(ROOT / "model_repository")
    print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
