"""The gateway's memory under bursts of maximal bodies of each shape: the most Python objects, the longest strings,
the deepest nesting a body of GATEWAY_MAX_BODY_BYTES can hold.

Shapes (SHAPES): `maximal`, the largest body the API can use (10000 document objects of prose); `long_strings`, 64 KB
documents of wide characters; `many_documents`, short strings far past GATEWAY_MAX_DOCUMENTS; `small_objects` and
`deep_nesting`, 10000 document objects holding small objects or lists nested 64 deep, as many as the size allows. Each
of the last three comes again as `..._two_fit`: as large as this checkout's gateway takes two of at once (half its
default body budget in weight: bytes and JSON values, gateway.bodies), the heaviest of its shape it holds.

Each row starts a gateway in its own process, sends `burst` bodies of one shape at once, and reads the process's
peak RSS (VmHWM) and each call's status. The gateway is either `python -m gateway` against a Triton address that
accepts connections and never answers (`silent`: every admitted call holds its parsed body, its requests built,
until GATEWAY_TIMEOUT_S), or the gateway with the tests' stub in place of its Triton client (`stub`,
benchmarks/stub_gateway.py: each request answered after a delay, and the answer, documents returned, built and sent).
`--before REF` runs every row with the gateway of that commit first, then with this checkout's, one after the other
(the code of REF is taken with `git archive`), and reports the ratio of their peaks. Printed as a table and written
as JSON:

    .venv/bin/python -m benchmarks.gateway_body_memory --before 6aa0e51 \\
        --out benchmarks/results/cpu-gateway-body-memory-shapes.json

`--server` runs the whole path instead, with the default budget only: the gateway in front of the CPU server started
from this checkout, so that admitted bodies are also split, made into tensors and sent over gRPC. A maximal call
takes minutes there, so the peak is read after `--sample-s` seconds, the admitted calls still in Triton:

    .venv/bin/python -m benchmarks.gateway_body_memory --server --shapes maximal --bursts 8 \\
        --out benchmarks/results/cpu-gateway-body-memory-server.json
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.procs import status_mb
from gateway.bodies import VALUE_BYTES, JsonValues
from gateway.settings import Settings
from tests.support.triton_server import start_server, stop_server
from tools.local_server import free_port

ROOT = Path(__file__).resolve().parent.parent
MAX_BODY = 32 * 1024 * 1024  # the gateway's default GATEWAY_MAX_BODY_BYTES
DOCUMENTS = 10_000  # the gateway's default GATEWAY_MAX_DOCUMENTS
TIMEOUT_S = 8  # GATEWAY_TIMEOUT_S: how long each call holds its body against the silent Triton
# A call's answer may take minutes: the gateway before its bodies were weighed parsed and answered 16 million nested
# lists of one body in 2 minutes here
ANSWER_TIMEOUT_S = 600
# The stub's time per Triton request: a call of 10000 documents holds its body 3 times this (10 requests, 4 at a time)
STUB_DELAY_S = 2
WORDS = "paris is the capital of france and the seine runs through it ".split()
# What a gateway of another commit needs from its tree: its code and the tests' stub of its client.
GATEWAY_PATHS = ["gateway", "python_backends", "reranker_client", "tests/__init__.py", "tests/gateway"]


def _body(documents: list) -> bytes:
    """Characters outside ASCII as they are, not escaped: the body's text, decoded whole to be parsed, is as wide as
    its widest character."""
    query = "capital of france"
    return json.dumps({"query": query, "documents": documents}, separators=(",", ":"), ensure_ascii=False).encode()


def _room(size: int, documents: int = DOCUMENTS) -> int:
    """JSON bytes each of `documents` documents may take, the body staying under `size`."""
    return (size - 1024) // documents - 2


def maximal_body(size: int = MAX_BODY) -> bytes:
    """The gateway's most documents, as objects of prose, filling the body: the largest body the API can use. Each
    document differs, as real ones do."""
    room = _room(size) - 12
    texts = [(f"{i} " + " ".join(WORDS[(i + j) % len(WORDS)] for j in range(room // 5)))[:room]
             for i in range(DOCUMENTS)]
    return _body([{"text": t} for t in texts])


def long_strings_body(size: int = MAX_BODY) -> bytes:
    """Documents of 64 KB (the server's max_document_bytes), each ending in a character outside the BMP: Python
    holds such a string in 4 bytes a character."""
    length = 65_000
    count = (size - 1024) // (length + 3)  # `"...",`
    return _body([(f"{i} " + "lorem ipsum " * (length // 12))[:length - 4] + "\U0001F600" for i in range(count)])


def many_documents_body(size: int = MAX_BODY) -> bytes:
    """Short strings, far more documents than GATEWAY_MAX_DOCUMENTS: the body is refused for its count, after it is
    parsed."""
    return _body([f"{i:06x}" for i in range((size - 1024) // 9)])  # `"xxxxxx",`


def _documents_body(documents: list[str]) -> bytes:
    """A body of documents already spelled in JSON (built as text: as Python objects they would take the benchmark
    process gigabytes)."""
    return ('{"query":"capital of france","documents":[' + ",".join(documents) + "]}").encode()


def small_objects_body(size: int = MAX_BODY) -> bytes:
    """The gateway's most documents, each an object holding a list of small objects, as many as fill the body: the
    most Python objects a body the API accepts can hold (a document object is returned as sent)."""
    count = (_room(size) - 40) // 14  # `{"k":"xxxxx"},`
    return _documents_body(['{"text":"d%d","meta":[%s]}' % (i, ",".join(
        '{"k":"%05x"}' % ((i * count + j) % 0xfffff) for j in range(count))) for i in range(DOCUMENTS)])


def deep_nesting_body(size: int = MAX_BODY, depth: int = 61) -> bytes:
    """The gateway's most documents, each an object holding lists nested as deep as a value may go (64 levels, the
    documents list and the document included), as many as fill the body."""
    nest = "[" * depth + "]" * depth
    nests = ",".join([nest] * ((_room(size) - 40) // (len(nest) + 1)))
    return _documents_body(['{"text":"d%d","x":[%s]}' % (i, nests) for i in range(DOCUMENTS)])


def weight(body: bytes) -> int:
    """What the body weighs in this checkout's gateway: its bytes and its JSON values (gateway.bodies)."""
    return len(body) + VALUE_BYTES * JsonValues().count(body)


def two_fit(shape: Callable[..., bytes]) -> Callable[[], bytes]:
    """The shape at the size whose weight is half the default body budget: the heaviest body of it that this
    checkout's gateway holds two of at once (at the size limit it refuses the shape for its values)."""
    def body() -> bytes:
        full = shape()
        return shape(int(len(full) * Settings().max_inflight_body_bytes / 2 / weight(full)))
    return body


SHAPES: dict[str, Callable[[], bytes]] = {
    "maximal": maximal_body, "long_strings": long_strings_body, "many_documents": many_documents_body,
    "small_objects": small_objects_body, "deep_nesting": deep_nesting_body,
    "many_documents_two_fit": two_fit(many_documents_body), "small_objects_two_fit": two_fit(small_objects_body),
    "deep_nesting_two_fit": two_fit(deep_nesting_body),
}


def peak_rss_mb(pid: int) -> float:
    return status_mb(pid, "VmHWM")["VmHWM"]


def post(url: str, body: bytes) -> int | str:
    """The answer's status; "reset" when the gateway answered (a refusal) before taking the whole body and the
    connection ended while the client was still sending it; "no answer" after ANSWER_TIMEOUT_S."""
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT_S) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except TimeoutError:
        return "no answer"
    except (urllib.error.URLError, ConnectionError):
        return "reset"


@contextlib.contextmanager
def source_of(ref: str | None) -> Iterator[Path]:
    """The tree whose gateway runs: this checkout, or the gateway of commit `ref` unpacked in a temporary folder."""
    if ref is None:
        yield ROOT
        return
    archive = subprocess.run(["git", "archive", ref, *GATEWAY_PATHS], cwd=ROOT, capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp)


def start_gateway(source: Path, upstream: str, triton_url: str, port: int, timeout_s: float,
                  budget: int | None) -> subprocess.Popen:
    """The gateway of `source` on `port`, ready; `upstream` "silent" (`python -m gateway` against `triton_url`) or
    "stub"."""
    env = dict(os.environ, PYTHONPATH=str(source), TRITON_GRPC_URL=triton_url, GATEWAY_PORT=str(port),
               GATEWAY_TIMEOUT_S=str(timeout_s), GATEWAY_MAX_RETRIES="0", GATEWAY_LOG_LEVEL="warning",
               STUB_DELAY_S=str(STUB_DELAY_S))
    if budget is not None:
        env["GATEWAY_MAX_INFLIGHT_BODY_BYTES"] = str(budget)
    script = [str(ROOT / "benchmarks" / "stub_gateway.py")] if upstream == "stub" else ["-m", "gateway"]
    gateway = subprocess.Popen([sys.executable, *script], env=env, cwd=source)
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=1).close()
            return gateway
        except OSError:
            time.sleep(0.1)
    gateway.kill()
    raise RuntimeError("the gateway did not start")


def run(burst: int, budget: int | None, body: bytes, triton_url: str, source: Path = ROOT, upstream: str = "silent",
        sample_s: float | None = None) -> dict:
    """One burst; `sample_s`: read the peak that long after sending, whether or not the calls are answered."""
    port = free_port()
    # sampled: the admitted calls are still in Triton when the peak is read
    timeout_s = TIMEOUT_S if sample_s is None else sample_s + 60
    gateway = start_gateway(source, upstream, triton_url, port, timeout_s, budget)
    pool = ThreadPoolExecutor(burst)
    try:
        idle = peak_rss_mb(gateway.pid)
        started = time.monotonic()
        calls = [pool.submit(post, f"http://127.0.0.1:{port}/v1/rerank", body) for _ in range(burst)]
        if sample_s is None:
            statuses = [call.result() for call in calls]
        else:
            time.sleep(sample_s)
            statuses = [call.result() if call.done() else "in flight" for call in calls]
        return {"burst": burst, "budget_bytes": budget, "idle_rss_mb": round(idle, 1),
                "peak_rss_mb": round(peak_rss_mb(gateway.pid), 1), "statuses": dict(Counter(statuses)),
                "seconds": round(time.monotonic() - started, 1)}
    finally:
        if sample_s is None:
            gateway.terminate()
        else:  # not its graceful stop, which would wait for the calls still in Triton
            gateway.kill()
        gateway.wait(30)
        pool.shutdown(wait=True)  # the calls still in flight end with the gateway's connections


def silent_triton() -> socket.socket:
    """Accepts (the kernel's backlog) and never answers: a Triton that hangs."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    return silent


def ratios(rows: list[dict]) -> list[dict]:
    """Each row of this checkout against the same row of the commit before: peaks, and peaks over idle."""
    before = {(r["shape"], r["upstream"], r["burst"]): r for r in rows if r["gateway"] != "this checkout"}
    out = []
    for row in rows:
        old = before.get((row["shape"], row["upstream"], row["burst"]))
        if row["gateway"] == "this checkout" and old is not None:
            grown, old_grown = row["peak_rss_mb"] - row["idle_rss_mb"], old["peak_rss_mb"] - old["idle_rss_mb"]
            out.append({"shape": row["shape"], "upstream": row["upstream"], "burst": row["burst"],
                        "peak": round(row["peak_rss_mb"] / old["peak_rss_mb"], 3),
                        "over_idle": round(grown / old_grown, 3) if old_grown > 0 else None})
    return out


def compare(args: argparse.Namespace, bodies: dict[str, bytes]) -> tuple[list[dict], str]:
    """Every shape x upstream x burst, the gateway of `--before` (if given) then this checkout's, one after the
    other, against one silent Triton."""
    silent = silent_triton()
    triton_url = f"127.0.0.1:{silent.getsockname()[1]}"
    rows = []
    try:
        with source_of(args.before) as before:
            sources = ([(f"before ({args.before})", before)] if args.before else []) + [("this checkout", ROOT)]
            for (shape, body), upstream, burst in itertools.product(bodies.items(), args.upstreams, args.bursts):
                for label, source in sources:
                    row = run(burst, args.budget, body, triton_url, source, upstream)
                    rows.append({"shape": shape, "upstream": upstream, "gateway": label, **row})
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        silent.close()
    return rows, f"Triton silent for {TIMEOUT_S} s, or the stub answering each request after {STUB_DELAY_S} s"


def whole_path(args: argparse.Namespace, bodies: dict[str, bytes]) -> tuple[list[dict], str]:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "server.log")
        try:
            rows = [{"shape": shape, "upstream": "cpu server", "gateway": "this checkout",
                     **run(burst, args.budget, body, server.grpc_url, sample_s=args.sample_s)}
                    for shape, body in bodies.items() for burst in args.bursts]
        finally:
            stop_server(server)
    return rows, f"the CPU server, peak read {args.sample_s:g} s after sending"


def this_checkout() -> dict:
    """The commit measured as "this checkout", whether its tree had changes, and its body limits."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"), "uncommitted_changes": bool(git("status", "--porcelain")),
            "max_body_bytes": Settings().max_body_bytes, "max_inflight_body_bytes": Settings().max_inflight_body_bytes,
            "value_bytes": VALUE_BYTES}


def print_table(bodies: dict[str, bytes], against: str, rows: list[dict], compared: list[dict]) -> None:
    print(f"bodies of {', '.join(f'{s} {len(b)}' for s, b in bodies.items())} bytes; against {against}")
    print(f"{'shape':>22} {'upstream':>10} {'burst':>5} {'gateway':>24} {'idle MB':>8} {'peak MB':>8}  statuses")
    for row in rows:
        print(f"{row['shape']:>22} {row['upstream']:>10} {row['burst']:>5} {row['gateway']:>24} "
              f"{row['idle_rss_mb']:>8} {row['peak_rss_mb']:>8}  {row['statuses']}")
    for ratio in compared:
        print(f"{ratio['shape']:>22} {ratio['upstream']:>10} {ratio['burst']:>5}  after / before: peak "
              f"{ratio['peak']}, over idle {ratio['over_idle']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--bursts", nargs="+", type=int, default=[1, 8], help="bodies sent at once")
    parser.add_argument("--upstreams", nargs="+", choices=["silent", "stub"], default=["silent", "stub"])
    parser.add_argument("--budget", type=int, help="GATEWAY_MAX_INFLIGHT_BODY_BYTES (default: each gateway's own)")
    parser.add_argument("--before", metavar="REF", help="a commit whose gateway runs each row first")
    parser.add_argument("--server", action="store_true", help="the whole path: the CPU server behind the gateway")
    parser.add_argument("--sample-s", type=float, default=30.0, help="with --server: when the peak is read")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    measured = this_checkout()  # at the start: what runs is the tree as it was then
    bodies = {shape: SHAPES[shape]() for shape in args.shapes}
    rows, against = (whole_path if args.server else compare)(args, bodies)
    compared = ratios(rows)
    print_table(bodies, against, rows, compared)
    if args.out:
        result = {"body_bytes": {s: len(b) for s, b in bodies.items()}, "against": against, "before": args.before,
                  "this_checkout": measured, "rows": rows, "ratios": compared}
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
