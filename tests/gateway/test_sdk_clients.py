"""The official client SDKs, unchanged, against the gateway in front of the real tritonserver: cohere's Client (v1)
and ClientV2, langchain-cohere's CohereRerank and llama-index's CohereRerank. They run in their own venv
(build/sdk-venv, tests/gateway/conftest.py) through tests/gateway/sdk_scenarios.py, which prints what each SDK
handed its caller; here every ranking and every field those callers read is asserted. The README's client
snippets run here too, as written there."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.support.triton_server import ROOT

from .sdk_scenarios import IRRELEVANT, OTHER, QUERY, RELEVANT

SCENARIOS = ROOT / "tests" / "gateway" / "sdk_scenarios.py"
README = ROOT / "README.md"
README_URL = "http://localhost:8080"  # what the README's snippets call; the test points them at its gateway


@pytest.fixture(scope="module")
def report(gateway, sdk_python) -> dict:
    done = subprocess.run([str(sdk_python), str(SCENARIOS), gateway.url], capture_output=True, text=True, timeout=300)
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


def readme_snippets() -> dict[str, str]:
    """The README's python blocks that follow a `<!-- sdk-snippet: NAME -->` marker."""
    text = README.read_text()
    return dict(re.findall(r"<!-- sdk-snippet: ([\w-]+) -->\s*```python\n(.*?)```", text, flags=re.S))


@pytest.mark.parametrize("name,expected", [("cohere-v2", r"^1 [01]\.\d+$"), ("langchain", rf"^[01]\.\d+ {re.escape(RELEVANT)}$")])
def test_the_readme_snippets_run_as_written(name, expected, gateway, sdk_python):
    snippet = readme_snippets()[name]
    assert README_URL in snippet and QUERY in snippet
    done = subprocess.run(
        [str(sdk_python), "-c", snippet.replace(README_URL, gateway.url)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert re.match(expected, done.stdout.splitlines()[0]), done.stdout
