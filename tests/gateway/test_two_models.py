"""Two models in one tritonserver, routed and shadowed by the gateway, as docs/YOUR_MODEL.md shows it.

The module runs the page's `$` commands in order (check -> add with a document sample, the checkpoint's folder named
unlike the variant -> fit, which scores through the variant and installs its profile -> a second ensemble -> serve
both -> gateway with a shadow -> switch the default) on a copy of the repository and the tiny random cross-encoder,
and compares what each prints with the page. The one server it starts (the page's "serve both": the embedded MiniLM
as `reranker`, the tiny cross-encoder as `tiny-bert`) then answers the other tests: both ensembles over HTTP and
gRPC, each with its own profile (tiny-bert's the one `fit` installed), the gateway's routing, and the shadow series,
which must equal the statistics computed here from the two models' own answers (they move for the disagreeing
candidate and stay at full agreement when the candidate is the primary itself), and the raw scores `fit` scored
offline (the serving preprocess and engine in-process, without Triton) must be the served RAW_SCORES. `fit` runs as
the command a user types, in its own process: the vLLM engine it starts is gone when the command ends.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from gateway.agreement import spearman, top_k_overlap
from python_backends.calibrate.drift import DriftWindow
from python_backends.calibrate.profile_schema import load_profile
from reranker_calibrate.pair_scoring import PrecomputedScorer, read_pairs
from reranker_client import RerankClient
from reranker_model.cli import main as reranker_model
from tests.support.gateway import RunningGateway, start_gateway, stop_gateway
from tests.support.tiny_models import session_models
from tests.support.triton_server import ROOT, RunningServer, copy_repository, start_server, stop_server

pytestmark = pytest.mark.integration

DOC = ROOT / "docs" / "YOUR_MODEL.md"
SHOWN_ROOT = "/work/main"  # the checkout the page's outputs were taken in
SHOWN_MODEL, SHOWN_NO_TOKENIZER = "/tmp/tiny-bert-ce", "/tmp/no-tokenizer"
QUERIES = ["what is the capital of france", "which city has the eiffel tower", "how fast is a train",
           "what do cats eat", "where do people live in winter", "who built the tower"]
OFFLINE_TOLERANCE = 1e-5  # max |offline - served| raw score on CPU
ENGINE_COMMANDS = ("score", "fit")  # run as the user types them, in a process of their own: the engine ends with it
PROFILE = "build/beside/tiny-bert_calibrate/profiles/tiny-bert-ce.json"  # the second ensemble's copy of the profile
DOCUMENTS = ["paris is the capital of france", "bananas are yellow", "berlin is the capital of germany",
             "the eiffel tower is in paris", "cats eat fish", "trains run fast on the road"]


@dataclass(frozen=True)
class Command:
    line: str
    shown: str  # the output the page shows


def documented_commands() -> list[Command]:
    """Each indented `$ ` line of the page and the indented lines under it."""
    commands: list[Command] = []
    line, shown = None, []
    for text in DOC.read_text().splitlines() + [""]:
        if text.startswith("    $ ") or not text.startswith("    "):
            if line is not None:
                commands.append(Command(line, "\n".join(shown)))
            line, shown = (text[6:], []) if text.startswith("    $ ") else (None, [])
        elif line is not None:
            shown.append(text[4:])
    return commands


def normalized(text: str, workspace: "Workspace") -> str:
    """What may differ between runs and machines: paths, times, dates, ids, float digits past the 4th decimal, and
    the values of the gateway's series."""
    for actual, shown in ((str(workspace.model), SHOWN_MODEL), (str(workspace.no_tokenizer), SHOWN_NO_TOKENIZER),
                          (str(ROOT), SHOWN_ROOT)):
        text = text.replace(actual, shown)
    text = re.sub(r"\d+ pairs in [\d.]+ s: [\d.]+ pairs/s", "N pairs in T s: R pairs/s", text)
    text = re.sub(r"^(scored \d+ pairs .*) in [\d.]+ s$", r"\1 in T s", text, flags=re.M)
    text = re.sub(r"\d{4}-\d{2}-\d{2}\.\d+", "DATE", text)
    text = re.sub(r'"id":"[^"]*"', '"id":"ID"', text)
    text = re.sub(r"^(gateway_shadow\S*) \S+$", r"\1 VALUE", text, flags=re.M)
    return re.sub(r"(\d+\.\d{4})\d+", r"\1", text).strip()


@dataclass
class Workspace:
    root: Path
    model: Path
    no_tokenizer: Path
    log_dir: Path
    server: RunningServer | None = None
    gateway: RunningGateway | None = None
    outputs: list[tuple[Command, str]] = field(default_factory=list)

    @property
    def repository(self) -> Path:
        return self.root / "model_repository"

    def run(self, command: Command) -> str:
        words = shlex.split(command.line.replace(SHOWN_MODEL, str(self.model))
                            .replace(SHOWN_NO_TOKENIZER, str(self.no_tokenizer)))
        env = {}
        while "=" in words[0]:
            key, _, value = words.pop(0).partition("=")
            env[key] = str(self.root / value) if value.startswith("build/") else value
        tool, args = words[0], words[1:]
        if tool == "reranker-model" and args[0] not in ENGINE_COMMANDS:
            return self._in_process(args)
        if tool in ("reranker-model", "reranker-calibrate"):
            module = {"reranker-model": "reranker_model", "reranker-calibrate": "reranker_calibrate.cli"}[tool]
            extra = ["--repository", str(self.repository)] if tool == "reranker-model" else []
            code = f"import sys; from {module} import main; sys.exit(main())" if "." in module else None
            argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", module]
            done = subprocess.run([*argv, *extra, *args], cwd=self.root, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-4000:]
            return done.stdout
        if tool == "cp":
            shutil.copyfile(self.root / args[0], self.root / args[1])
            return ""
        if tool == "scripts/start_server.sh":
            extra = tuple(re.sub(r"=(build/\S+)", lambda m: f"={self.root / m.group(1)}", a) for a in args)
            self.server = start_server(self.log_dir / "server.log", model_repository=self.repository, extra_args=extra)
            return ""
        if tool == "reranker-gateway":
            if self.gateway is not None:
                stop_gateway(self.gateway)
            self.gateway = start_gateway(self.server.grpc_url, self.log_dir / f"gateway-{len(self.outputs)}.log",
                                         GATEWAY_MODEL_ALIASES="", **env)
            wait_ready(self.gateway)
            return ""
        assert tool == "curl", f"the page shows a command this test does not run: {command.line}"
        if "/metrics" in command.line:
            settle(self.gateway)
        line = command.line.replace("localhost:8080", self.gateway.url.removeprefix("http://"))
        return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=60).stdout

    def _in_process(self, args: list[str]) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), contextlib.chdir(self.root):
            reranker_model(["--repository", str(self.repository), *args])
        return out.getvalue()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def post(gateway: RunningGateway, body: dict, path: str = "/v2/rerank") -> tuple[int, dict]:
    request = urllib.request.Request(f"{gateway.url}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_ready(gateway: RunningGateway) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if json.loads(get(f"{gateway.url}/health"))["status"] == "ready":
                return
        except OSError:
            pass
        assert time.monotonic() < deadline, gateway.log_tail()
        time.sleep(0.2)


def key(name: str, **labels: str) -> str:
    """A series as the exposition format writes it: labels in name order."""
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def series(gateway: RunningGateway) -> dict[str, float]:
    """The gateway's shadow series, by `key`."""
    values = {}
    for line in get(f"{gateway.url}/metrics").splitlines():
        if line.startswith("gateway_shadow"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def offered(values: dict[str, float]) -> float:
    return sum(v for k, v in values.items() if k.startswith("gateway_shadow_calls_total"))


def settle(gateway: RunningGateway, calls: int | None = None, timeout_s: float = 30) -> dict[str, float]:
    """The series once the shadow has handled `calls` calls (None: once the count stops moving)."""
    deadline, last = time.monotonic() + timeout_s, -1.0
    while True:
        values = series(gateway)
        done = offered(values)
        if (calls is not None and done >= calls) or (calls is None and done == last and done > 0):
            return values
        assert time.monotonic() < deadline, f"shadow handled {done} calls: {values}"
        last = done
        time.sleep(0.5)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    root = tmp_path_factory.mktemp("your_model")
    copy_repository(root / "model_repository")
    model = root / "tiny-bert-ce"  # the folder's name is the profile's (profiles/tiny-bert-ce.json), not the variant's
    shutil.copytree(session_models(tmp_path_factory)["bert"], model)
    no_tokenizer = root / "no-tokenizer"
    shutil.copytree(model, no_tokenizer, ignore=shutil.ignore_patterns("tokenizer.json"))
    shutil.copyfile(ROOT / "data" / "calibration" / "pairs.jsonl", root / "sample.jsonl")
    space = Workspace(root, model, no_tokenizer, tmp_path_factory.mktemp("logs"))
    try:
        for command in documented_commands():
            space.outputs.append((command, space.run(command)))
        yield space
    finally:
        if space.gateway is not None:
            stop_gateway(space.gateway)
        if space.server is not None:
            stop_server(space.server)


@pytest.mark.parametrize("index", range(len(documented_commands())))
def test_each_documented_command_prints_what_the_page_shows(workspace, index):
    command, output = workspace.outputs[index]
    assert normalized(output, workspace) == normalized(command.shown, workspace), (
        f"$ {command.line}\n--- printed ---\n{output}")


def fitted_tag(workspace: Workspace) -> str:
    """NAME@VERSION of the profile the page's `fit` installed (its version carries the day it ran)."""
    tag = load_profile(workspace.root / PROFILE).tag
    assert tag.startswith("tiny-bert-ce@") and not tag.endswith("-unfitted"), tag
    return tag


def client_of(workspace: Workspace, model: str, protocol: str) -> RerankClient:
    return RerankClient(workspace.server.url(protocol), protocol=protocol, model_name=model)


def raw_scores(workspace: Workspace, model: str, query: str, documents: list[str]) -> np.ndarray:
    client = client_of(workspace, model, "grpc")
    try:
        return client.rerank(query, documents).raw_scores
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_both_ensembles_answer_with_their_own_scores_and_profiles(workspace, protocol):
    answers = {}
    for model in ("reranker", "tiny-bert"):
        client = client_of(workspace, model, protocol)
        try:
            answers[model] = client.rerank(QUERIES[0], DOCUMENTS)
        finally:
            client.close()
    assert answers["reranker"].calibration.startswith("all-minilm-l6-v2@")
    assert answers["tiny-bert"].calibration == fitted_tag(workspace)
    assert answers["reranker"].results[0].index == 0  # MiniLM finds Paris
    assert answers["tiny-bert"].raw_scores.shape == (len(DOCUMENTS),)
    assert not np.allclose(answers["reranker"].raw_scores, answers["tiny-bert"].raw_scores)


def test_the_gateway_routes_by_model_and_names_the_served_ones(workspace):
    gateway = workspace.gateway  # the page's last gateway: RERANK_MODEL=tiny-bert, GATEWAY_MODELS=reranker
    tags = {}
    for model in ("reranker", "tiny-bert", None):
        status, body = post(gateway, {"model": model, "query": QUERIES[0], "documents": DOCUMENTS})
        assert status == 200, body
        tags[model] = body["meta"]["calibration"]
    assert tags["reranker"].startswith("all-minilm-l6-v2@")
    assert tags["tiny-bert"] == tags[None] == fitted_tag(workspace)
    status, body = post(gateway, {"model": "bge", "query": "q", "documents": ["d"]})
    assert (status, body["message"]) == (404, "model 'bge' is not served here; served: tiny-bert, reranker "
                                              "(GET /health lists them)")
    # TEI's /rerank too: each model's raw scores, as the server gives them to that model's ensemble
    for model in ("reranker", "tiny-bert"):
        status, ranks = post(gateway, {"model": model, "query": QUERIES[0], "texts": DOCUMENTS, "raw_scores": True},
                             "/rerank")
        assert status == 200, ranks
        served = raw_scores(workspace, model, QUERIES[0], DOCUMENTS)
        scores = [rank["score"] for rank in sorted(ranks, key=lambda rank: rank["index"])]
        assert scores == pytest.approx(served.tolist(), abs=OFFLINE_TOLERANCE)
    status, body = post(gateway, {"model": "bge", "query": "q", "texts": ["d"]}, "/rerank")
    assert (status, body["error_type"]) == (422, "Validation")


def shadow_gateway(workspace: Workspace, name: str, **env: str) -> RunningGateway:
    gateway = start_gateway(workspace.server.grpc_url, workspace.log_dir / f"{name}.log", GATEWAY_SHADOW_FRACTION="1",
                            GATEWAY_SHADOW_TOP_K="2", GATEWAY_SHADOW_DRIFT_WINDOW="8",
                            GATEWAY_SHADOW_CONCURRENCY="1", **env)  # one worker: the calls in the order sent
    wait_ready(gateway)
    return gateway


def shadowed_series(workspace: Workspace, name: str, **env: str) -> dict[str, float]:
    """The shadow series after every query was sent through a gateway shadowing with `env`; callers always get the
    primary's (MiniLM's) answer."""
    gateway = shadow_gateway(workspace, name, **env)
    try:
        for query in QUERIES:
            status, body = post(gateway, {"query": query, "documents": DOCUMENTS})
            assert status == 200 and body["meta"]["calibration"].startswith("all-minilm-l6-v2@"), body
        return settle(gateway, len(QUERIES))
    finally:
        stop_gateway(gateway)


def test_the_shadow_series_are_the_disagreeing_candidates_statistics(workspace):
    profile = workspace.root / PROFILE
    values = shadowed_series(workspace, "shadow-tiny", GATEWAY_SHADOW_MODEL="tiny-bert",
                             GATEWAY_SHADOW_PROFILE=str(profile))
    labels = {"primary": "reranker", "candidate": "tiny-bert"}
    primary = [raw_scores(workspace, "reranker", q, DOCUMENTS) for q in QUERIES]
    candidate = [raw_scores(workspace, "tiny-bert", q, DOCUMENTS) for q in QUERIES]
    rho = [spearman(p, c) for p, c in zip(primary, candidate)]
    overlap = [top_k_overlap(p, c, 2) for p, c in zip(primary, candidate)]
    window = DriftWindow(load_profile(profile).raw_score_distribution, 8)
    window.add(np.concatenate(candidate))
    assert values[key("gateway_shadow_calls_total", **labels, outcome="compared")] == len(QUERIES)
    assert values[key("gateway_shadow_spearman_sum", **labels)] == pytest.approx(sum(rho), abs=1e-6)
    assert values[key("gateway_shadow_top_k_overlap_sum", **labels)] == pytest.approx(sum(overlap), abs=1e-9)
    psi = values[key("gateway_shadow_score_drift_psi", **labels, profile=fitted_tag(workspace))]
    assert psi == pytest.approx(window.psi(), rel=1e-6)
    print(f"disagreeing candidate: mean Spearman {np.mean(rho):.3f}, top-2 overlap {np.mean(overlap):.3f}, PSI {psi:.3f}")
    assert np.mean(rho) < 0.9 and np.mean(overlap) < 1.0  # a random model does not rank like MiniLM


def test_the_shadow_series_stay_at_full_agreement_for_the_same_model(workspace):
    values = shadowed_series(workspace, "shadow-same", GATEWAY_SHADOW_MODEL="reranker")
    labels = {"primary": "reranker", "candidate": "reranker"}
    assert values[key("gateway_shadow_calls_total", **labels, outcome="compared")] == len(QUERIES)
    assert values[key("gateway_shadow_spearman_sum", **labels)] == pytest.approx(len(QUERIES), abs=1e-9)
    assert values[key("gateway_shadow_top_k_overlap_sum", **labels)] == len(QUERIES)


def test_a_shadow_candidate_the_server_does_not_serve_stops_the_gateways_start(workspace):
    """A typo in GATEWAY_SHADOW_MODEL would otherwise count every shadow call as failed, and log nothing."""
    with pytest.raises(RuntimeError) as failed:
        shadow_gateway(workspace, "shadow-absent", GATEWAY_SHADOW_MODEL="absent")
    assert "GATEWAY_SHADOW_MODEL 'absent': Request for unknown model: 'absent' is not found" in str(failed.value)


def served_raw_scores(workspace: Workspace, model: str, pairs: Path) -> np.ndarray:
    rows = read_pairs(pairs)
    groups: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault(row.query, []).append(index)
    raw = np.empty(len(rows))
    for query, indices in groups.items():
        raw[indices] = raw_scores(workspace, model, query, [rows[i].document for i in indices])
    return raw


def test_offline_scores_of_the_added_model_are_its_served_raw_scores(workspace):
    """The raw scores the page's `reranker-model fit tiny-bert sample.jsonl` fitted on (its scored.jsonl) against
    the tiny-bert ensemble's."""
    sample = workspace.root / "sample.jsonl"
    scored = workspace.root / "build" / "calibration" / "tiny-bert" / "scored.jsonl"
    offline = PrecomputedScorer(scored).score(read_pairs(sample)).raw_scores
    served = served_raw_scores(workspace, "tiny-bert", sample)
    print(f"tiny-bert: max |offline - served| = {np.abs(offline - served).max():.2e} over {len(served)} pairs")
    assert np.abs(offline - served).max() <= OFFLINE_TOLERANCE
