"""reranker-model against the real server: a variant `add` writes for a tiny random cross-encoder is served unchanged
by tritonserver --model-config-name (HTTP and gRPC), and `score` (the serving preprocess and engine, in-process
without Triton) gives the served RAW_SCORES, for that variant and for the default MiniLM config. `score` runs as the
command a user types, in its own process: the vLLM engine it starts is gone when the command ends."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from reranker_calibrate.pair_scoring import PrecomputedScorer, read_pairs
from reranker_client import RerankClient
from reranker_model.cli import main
from tests.support.tiny_models import session_models
from tests.support.triton_server import ROOT, RunningServer, copy_repository, start_server, stop_server

VARIANT = "tiny-bert"
PAIRS = 40  # the first lines of the calibration data: several queries with their documents
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    lines = (ROOT / "data" / "calibration" / "pairs.jsonl").read_text().splitlines()[:PAIRS]
    path = tmp_path_factory.mktemp("pairs") / "pairs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def variant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, Path]]:
    root = tmp_path_factory.mktemp("model_tool")
    repository = copy_repository(root / "model_repository")
    bert = session_models(tmp_path_factory)["bert"]
    assert main(["--repository", str(repository), "add", VARIANT, str(bert)]) == 0
    running = start_server(root / "server.log", model_repository=repository,
                           extra_args=(f"--model-config-name={VARIANT}",))
    yield running, repository
    stop_server(running)


def served_raw_scores(server: RunningServer, protocol: str, pairs: Path) -> np.ndarray:
    rows = [json.loads(line) for line in pairs.read_text().splitlines()]
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(row["query"], []).append(index)
    raw = np.empty(len(rows))
    client = RerankClient(server.url(protocol), protocol=protocol)
    try:
        for query, indices in groups.items():
            raw[indices] = client.rerank(query, [rows[i]["document"] for i in indices]).raw_scores
    finally:
        client.close()
    return raw


def offline_raw_scores(repository: Path, name: str, pairs: Path, out: Path) -> tuple[np.ndarray, str]:
    """The scores and the last line `reranker-model score` printed."""
    command = [sys.executable, "-m", "reranker_model", "--repository", str(repository), "score", name, str(pairs),
               "-o", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    # the output is what reranker-calibrate fit --raw-scores-from takes
    return PrecomputedScorer(out).score(read_pairs(pairs)).raw_scores, done.stdout.splitlines()[-1]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_added_variant_is_served_over_both_protocols(variant_server, protocol):
    server, _ = variant_server
    client = RerankClient(server.url(protocol), protocol=protocol)
    try:
        response = client.rerank("what is the capital of france", ["bananas are yellow", "paris is the capital of france"])
    finally:
        client.close()
    assert sorted(r.index for r in response.results) == [0, 1]
    assert response.raw_scores.shape == (2,) and np.isfinite(response.raw_scores).all()
    assert response.calibration.startswith("bert-unfitted@")


def test_offline_scores_of_the_variant_are_its_served_raw_scores(variant_server, pairs_file, tmp_path):
    server, repository = variant_server
    offline, last_line = offline_raw_scores(repository, VARIANT, pairs_file, tmp_path / "scores.jsonl")
    assert last_line.startswith(f"{PAIRS} pairs in ")  # vLLM logs before it
    served = served_raw_scores(server, "grpc", pairs_file)
    print(f"{VARIANT}: max |offline - served| = {np.abs(offline - served).max():.2e}")
    assert np.abs(offline - served).max() <= TOLERANCE


def test_offline_scores_of_the_default_config_are_the_served_raw_scores(server, pairs_file, tmp_path):
    offline, _ = offline_raw_scores(ROOT / "model_repository", "default", pairs_file, tmp_path / "scores.jsonl")
    served = served_raw_scores(server, "http", pairs_file)
    print(f"default: max |offline - served| = {np.abs(offline - served).max():.2e}")
    assert np.abs(offline - served).max() <= TOLERANCE
