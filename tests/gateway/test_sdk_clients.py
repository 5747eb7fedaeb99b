"""The official client SDKs, unchanged, against the gateway in front of the real tritonserver: cohere's Client (v1)
and ClientV2, langchain-cohere's CohereRerank, llama-index's CohereRerank and litellm.rerank with each of its
providers whose API the gateway serves. They run in their own venv (build/sdk-venv, tests/gateway/conftest.py)
through tests/gateway/sdk_scenarios.py, which prints what each SDK handed its caller; here every ranking and every
field those callers read is asserted. The gateway has an API key, so each SDK is seen to send it, and a wrong one
to be refused. The client snippets of the README and docs/USAGE.md run here too, as written there, against a
gateway without a key."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.triton_server import ROOT

from tests.support.gateway import RunningGateway, start_gateway, stop_gateway
from .sdk_scenarios import API_KEY, IRRELEVANT, LITELLM_PROVIDERS, OTHER, QUERY, RELEVANT

SCENARIOS = ROOT / "tests" / "gateway" / "sdk_scenarios.py"
PAGES = (ROOT / "README.md", ROOT / "docs" / "USAGE.md")
SNIPPET_URL = "http://localhost:8080"  # what the pages' snippets call; the test points them at its gateway


@pytest.fixture(scope="module")
def keyed_gateway(server, tmp_path_factory) -> Iterator[RunningGateway]:
    running = start_gateway(server.grpc_url, tmp_path_factory.mktemp("keyed") / "gateway.log", GATEWAY_API_KEY=API_KEY)
    yield running
    stop_gateway(running)


@pytest.fixture(scope="module")
def report(keyed_gateway, sdk_python) -> dict:
    done = subprocess.run([str(sdk_python), str(SCENARIOS), keyed_gateway.url], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


def scenario(report: dict, name: str) -> dict:
    assert "error" not in report[name], report[name].get("error")
    return report[name]


def assert_ranked(results: list[dict], indices: list[int]) -> None:
    assert [r["index"] for r in results] == indices
    scores = [r["relevance_score"] for r in results]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)


def test_cohere_v1_client(report):
    run = scenario(report, "cohere_v1")
    strings = run["strings"]
    assert_ranked(strings["results"], [1, 2])  # top_n=2: Paris, then Berlin
    assert [r["document"] for r in strings["results"]] == [{"text": RELEVANT}, {"text": OTHER}]
    meta = strings["meta"]
    assert (meta["api_version"], meta["billed_units"], meta["truncated"]) == ("1", 1, 0)
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["id"])
    objects = run["objects"]
    assert_ranked(objects["results"], [1, 0])
    assert [r["document"] for r in objects["results"]] == [
        {"title": "France", "body": RELEVANT}, {"title": "Fruit", "body": IRRELEVANT}  # the objects as sent
    ]
    assert [r["document"] for r in run["bare"]["results"]] == [None, None]


def test_cohere_v2_client(report):
    run = scenario(report, "cohere_v2")
    assert_ranked(run["strings"]["results"], [1])  # top_n=1
    assert run["strings"]["results"][0]["document"] is None
    assert (run["strings"]["meta"]["api_version"], run["strings"]["meta"]["billed_units"]) == ("2", 1)
    assert_ranked(run["objects"]["results"], [1, 0])
    assert run["objects"]["results"][0]["document"] == {"text": RELEVANT, "id": "b"}


def test_cohere_v2_max_tokens_per_doc_is_honoured_and_counted(report):
    run = scenario(report, "cohere_v2")
    assert run["cut"]["meta"]["truncated"] == 2  # both documents are longer than 2 tokens
    assert run["whole"]["meta"]["truncated"] == 0
    assert run["whole"]["results"][0]["index"] == 1


def test_langchain_cohere_rerank(report):
    documents = scenario(report, "langchain")["documents"]
    assert [d["page_content"] for d in documents] == [RELEVANT, OTHER]
    assert [d["metadata"]["source"] for d in documents] == [1, 2]
    scores = [d["metadata"]["relevance_score"] for d in documents]
    assert 1.0 >= scores[0] > scores[1] >= 0.0


def test_llama_index_cohere_rerank(report):
    nodes = scenario(report, "llama_index")["nodes"]
    assert [(n["id"], n["text"]) for n in nodes] == [("n1", RELEVANT), ("n2", OTHER)]
    assert 1.0 >= nodes[0]["score"] > nodes[1]["score"] >= 0.0


@pytest.mark.parametrize("provider", LITELLM_PROVIDERS)
def test_litellm_rerank_providers(report, provider):
    run = scenario(report, "litellm")[provider]
    assert "error" not in run, run.get("error")
    assert_ranked(run["results"], [1, 2])  # top_n=2: Paris, then Berlin
    returned = LITELLM_PROVIDERS[provider][2]
    documents = [{"text": RELEVANT}, {"text": OTHER}] if returned else [None, None]
    assert [r["document"] for r in run["results"]] == documents


def test_a_wrong_api_key_is_refused(report):
    assert scenario(report, "wrong_key") == {
        "cohere_v2": {"refused": True, "type": "UnauthorizedError", "status_code": 401},
        "litellm_hosted_vllm": {"refused": True, "type": "AuthenticationError", "status_code": 401},
    }


def page_snippets() -> dict[str, str]:
    """The pages' python blocks that follow a `<!-- sdk-snippet: NAME -->` marker."""
    text = "\n".join(page.read_text() for page in PAGES)
    return dict(re.findall(r"<!-- sdk-snippet: ([\w-]+) -->\s*```python\n(.*?)```", text, flags=re.S))


@pytest.mark.parametrize("name,expected", [("cohere-v2", r"^1 [01]\.\d+$"), ("litellm", r"^1 [01]\.\d+$"),
                                           ("langchain", rf"^[01]\.\d+ {re.escape(RELEVANT)}$")])
def test_the_documented_snippets_run_as_written(name, expected, gateway, sdk_python):
    snippet = page_snippets()[name]
    assert SNIPPET_URL in snippet and QUERY in snippet
    done = subprocess.run(
        [str(sdk_python), "-c", snippet.replace(SNIPPET_URL, gateway.url)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert re.match(expected, done.stdout.splitlines()[0]), done.stdout
