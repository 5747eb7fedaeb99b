"""Admission by work answers at once: while one maximal request is tokenized, requests past rerank_preprocess's
batch_token_budget are refused with UNAVAILABLE in milliseconds, not after the maximal request's turn."""

from __future__ import annotations

import threading
import time

import pytest
from tritonclient.utils import InferenceServerException

import tritonclient.grpc as grpc_client
from reranker_client import build_inputs

# 120-letter words are one unknown token each: every document is read to the character cap, the slowest text to
# tokenize per admitted token. 7 KB a document prices it at its full span (a token covers >= 1 byte).
LONG_WORDS = (("a " + "\u00c9" * 120 + " ") * 30)[:3500]
PROSE = "the committee reviewed quarterly budget figures and scheduled another meeting about paris " * 24
MAXIMAL_DOCUMENTS = 1024  # max_documents: with ~254 tokens a document, all of the budget (262144) but ~4000 tokens
PROBE_DOCUMENTS = 32  # ~8000 tokens: past what the maximal request leaves, cheap to tokenize when admitted alone
REFUSAL_S = 0.1
STRAGGLER_S = 1.0
PROBING_S = 4.0
HEAD_STARTS_S = (0.3, 0.8, 1.5)
MAXIMAL_TIMEOUT_S = 8.0
PROBE_TIMEOUT_S = 2.0  # an admitted probe's engine work ends there: the scenario does not wait a minute for 40 of them
# the maximal request's answer once preprocess admitted it: scored, or ended by its timeout in the engine
ADMITTED = ("ok", "StatusCode.UNAVAILABLE: in ensemble 'reranker', [deadline] the request's timeout passed in "
                  "rerank_engine (8000 ms); its work was aborted")


def _infer(url: str, documents: list[str], timeout_s: float | None = None) -> tuple[str, float]:
    """One call and its answer's time, from the request's send: the connection is made and the inputs are built
    before (a refusal's time is the server's)."""
    client = grpc_client.InferenceServerClient(url)
    inputs = build_inputs(grpc_client, "capital of France", documents, top_n=1)
    kwargs = {"timeout": int(timeout_s * 1e6)} if timeout_s else {}
    client.is_server_live()
    started = time.monotonic()
    try:
        client.infer("reranker", inputs, client_timeout=300, **kwargs)
        outcome = "ok"
    except InferenceServerException as exc:
        outcome = f"{exc.status()}: {exc.message()}"
    finally:
        client.close()
    return outcome, time.monotonic() - started


def _scenario(url: str, head_start_s: float) -> tuple[str, list[tuple[str, float]]]:
    """One maximal request, then, `head_start_s` later, a probe every 50 ms (each on its own thread) for PROBING_S or
    until it is answered: the maximal request is tokenized for a few seconds here; the engine would take ~20 s
    more, so its timeout ends it there (admitted all the same). The head start lets its 3.5 MB reach preprocess
    before a probe holds some of the budget."""
    maximal: list[tuple[str, float]] = []
    sender = threading.Thread(
        target=lambda: maximal.append(_infer(url, [LONG_WORDS] * MAXIMAL_DOCUMENTS, MAXIMAL_TIMEOUT_S)))
    sender.start()
    time.sleep(head_start_s)
    probes: list[tuple[str, float]] = []
    threads = []
    while sender.is_alive() and len(threads) < PROBING_S / 0.05:
        threads.append(threading.Thread(
            target=lambda: probes.append(_infer(url, [PROSE] * PROBE_DOCUMENTS, PROBE_TIMEOUT_S))))
        threads[-1].start()
        time.sleep(0.05)
    for thread in [sender, *threads]:
        thread.join()
    return maximal[0][0], probes


@pytest.mark.alone
def test_requests_past_the_budget_are_refused_at_once_while_a_maximal_request_is_tokenized(server):
    # A probe admitted just before the maximal request arrives makes it the one refused: then the scenario repeats
    # with a longer head start (a slow machine takes longer to send it).
    for head_start_s in HEAD_STARTS_S:
        outcome, probes = _scenario(server.grpc_url, head_start_s)
        if outcome in ADMITTED:
            break
    assert outcome in ADMITTED, outcome
    refused = [seconds for answer, seconds in probes if "over its work budget" in answer]
    assert refused, f"no probe was refused while the maximal request was in flight: {probes}"
    assert all(answer.startswith("StatusCode.UNAVAILABLE") for answer, _ in probes if answer != "ok")
    # All but the slowest refusal within REFUSAL_S, that one within STRAGGLER_S: clean-clone CI runs each had one
    # refusal of 0.46-0.59 s among others of 3-11 ms (never seen on a warm checkout: a first-use cost of the run, or a
    # probe held behind the maximal request's 3.5 MB in Triton's gRPC front end, not settled).
    slowest = sorted(refused, reverse=True)
    assert slowest[0] < STRAGGLER_S and all(seconds < REFUSAL_S for seconds in slowest[1:]), slowest[:10]
