"""Runs inside build/sdk-venv (requirements/gateway-sdk.lock.txt), not the server venv: each official client SDK
calls the gateway at BASE_URL with API_KEY, and what the SDK hands its caller is printed as one JSON object,
scenario by scenario, for tests/gateway/test_sdk_clients.py to assert. Only the SDKs' public APIs are used.

    GATEWAY_API_KEY=sdk-scenarios-key reranker-gateway &   # or a gateway without a key: the SDKs send one anyway
    build/sdk-venv/bin/python tests/gateway/sdk_scenarios.py http://127.0.0.1:8080
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

QUERY = "What is the capital of France?"
IRRELEVANT = "Bananas are a good source of potassium."
RELEVANT = "Paris is the capital and largest city of France."
OTHER = "Berlin is the capital of Germany."
API_KEY = "sdk-scenarios-key"  # the gateway's GATEWAY_API_KEY in the tests; the SDKs refuse to start without one
WRONG_KEY = "not-the-key"
# LiteLLM's rerank providers whose wire format the gateway serves: (model, the path added to api_base, whether the
# documents come back). cohere/ picks Cohere's v2 API unless the base ends in /v1/rerank; huggingface/ sends TEI's
# body to /rerank, hosted_vllm/ and infinity/ vLLM's; jina_ai/ calls /v1/rerank whatever the base's path.
# infinity/ reads a returned document as a bare string (Infinity's answer), not vLLM's {"text": ...}, so it is
# asked for the ranking only.
LITELLM_PROVIDERS = {
    "cohere_v2": ("cohere/reranker", "", True),
    "cohere_v1": ("cohere/reranker", "/v1/rerank", True),
    "huggingface": ("huggingface/reranker", "", True),
    "hosted_vllm": ("hosted_vllm/reranker", "", True),
    "jina_ai": ("jina_ai/reranker", "", True),
    "infinity": ("infinity/reranker", "", False),
}


def _results(response: Any) -> list[dict[str, Any]]:
    out = []
    for r in response.results:
        document = getattr(r, "document", None)
        if document is not None and not isinstance(document, dict):
            document = document.dict() if hasattr(document, "dict") else dict(document)
        out.append({"index": r.index, "relevance_score": r.relevance_score, "document": document})
    return out


def _meta(response: Any) -> dict[str, Any]:
    meta = response.meta
    return {
        "api_version": meta.api_version.version,
        "billed_units": meta.billed_units.search_units,
        "truncated": getattr(meta, "truncated", None),  # the gateway's extra field; Cohere's meta allows extras
        "id": response.id,
    }


def cohere_v1(base_url: str) -> dict[str, Any]:
    import cohere

    client = cohere.Client(api_key=API_KEY, base_url=base_url)
    strings = client.rerank(query=QUERY, documents=[IRRELEVANT, RELEVANT, OTHER], top_n=2, return_documents=True)
    objects = client.rerank(
        model="reranker",
        query=QUERY,
        documents=[{"title": "Fruit", "body": IRRELEVANT}, {"title": "France", "body": RELEVANT}],
        rank_fields=["title", "body"],
        return_documents=True,
    )
    bare = client.rerank(query=QUERY, documents=[IRRELEVANT, RELEVANT], return_documents=False)
    return {
        "strings": {"results": _results(strings), "meta": _meta(strings)},
        "objects": {"results": _results(objects), "meta": _meta(objects)},
        "bare": {"results": _results(bare)},
    }


def cohere_v2(base_url: str) -> dict[str, Any]:
    import cohere

    client = cohere.ClientV2(api_key=API_KEY, base_url=base_url)
    strings = client.rerank(model="reranker", query=QUERY, documents=[IRRELEVANT, RELEVANT, OTHER], top_n=1)
    # ClientV2 5.x types documents as strings and has no return_documents argument; earlier v2 API versions took
    # objects and return_documents, which the SDK still sends as-is and through additional_body_parameters.
    objects = client.rerank(
        model="reranker",
        query=QUERY,
        documents=[{"text": IRRELEVANT, "id": "a"}, {"text": RELEVANT, "id": "b"}],  # type: ignore[list-item]
        request_options={"additional_body_parameters": {"return_documents": True}},
    )
    cut = client.rerank(model="reranker", query=QUERY, documents=[IRRELEVANT, RELEVANT], max_tokens_per_doc=2)
    whole = client.rerank(model="reranker", query=QUERY, documents=[IRRELEVANT, RELEVANT], max_tokens_per_doc=4096)
    return {
        "strings": {"results": _results(strings), "meta": _meta(strings)},
        "objects": {"results": _results(objects), "meta": _meta(objects)},
        "cut": {"results": _results(cut), "meta": _meta(cut)},
        "whole": {"results": _results(whole), "meta": _meta(whole)},
    }


def langchain(base_url: str) -> dict[str, Any]:
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    reranker = CohereRerank(model="reranker", base_url=base_url, cohere_api_key=API_KEY, top_n=2)
    documents = [Document(page_content=text, metadata={"source": i}) for i, text in
                 enumerate([IRRELEVANT, RELEVANT, OTHER])]
    ranked = reranker.compress_documents(documents, QUERY)
    return {"documents": [{"page_content": d.page_content, "metadata": d.metadata} for d in ranked]}


def llama_index(base_url: str) -> dict[str, Any]:
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.postprocessor.cohere_rerank import CohereRerank

    reranker = CohereRerank(top_n=2, model="reranker", api_key=API_KEY, base_url=base_url)
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.0)
             for i, t in enumerate([IRRELEVANT, RELEVANT, OTHER])]
    ranked = reranker.postprocess_nodes(nodes, query_bundle=QueryBundle(QUERY))
    return {"nodes": [{"id": n.node.node_id, "text": n.node.get_content(), "score": n.score} for n in ranked]}


def _litellm() -> Any:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # its bundled price list; else it fetches one at import
    import litellm

    return litellm


def litellm_providers(base_url: str) -> dict[str, Any]:
    litellm = _litellm()
    report: dict[str, Any] = {}
    for name, (model, path, return_documents) in LITELLM_PROVIDERS.items():
        try:
            response = litellm.rerank(model=model, api_base=base_url + path, api_key=API_KEY, query=QUERY,
                                      documents=[IRRELEVANT, RELEVANT, OTHER], top_n=2,
                                      return_documents=return_documents)
            report[name] = {"results": [{"index": r["index"], "relevance_score": r["relevance_score"],
                                         "document": r.get("document")} for r in response.results]}
        except Exception:
            report[name] = {"error": traceback.format_exc()}
    return report


def wrong_key(base_url: str) -> dict[str, Any]:
    """What a caller sees when the gateway refuses its key."""
    import cohere

    litellm = _litellm()
    report: dict[str, Any] = {}
    calls = {
        "cohere_v2": lambda: cohere.ClientV2(api_key=WRONG_KEY, base_url=base_url).rerank(
            model="reranker", query=QUERY, documents=[RELEVANT]),
        "litellm_hosted_vllm": lambda: litellm.rerank(
            model="hosted_vllm/reranker", api_base=base_url, api_key=WRONG_KEY, query=QUERY, documents=[RELEVANT]),
    }
    for name, call in calls.items():
        try:
            call()
            report[name] = {"refused": False}
        except Exception as error:
            report[name] = {"refused": True, "type": type(error).__name__,
                            "status_code": getattr(error, "status_code", None)}
    return report


SCENARIOS: dict[str, Callable[[str], dict[str, Any]]] = {
    "cohere_v1": cohere_v1,
    "cohere_v2": cohere_v2,
    "langchain": langchain,
    "llama_index": llama_index,
    "litellm": litellm_providers,
    "wrong_key": wrong_key,
}


def main() -> None:
    base_url = sys.argv[1]
    report: dict[str, Any] = {}
    with contextlib.redirect_stdout(sys.stderr):  # what an SDK prints (LiteLLM's help banner) stays out of the JSON
        for name, scenario in SCENARIOS.items():
            try:
                report[name] = scenario(base_url)
            except Exception:  # one SDK failing must not hide what the others did
                report[name] = {"error": traceback.format_exc()}
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
