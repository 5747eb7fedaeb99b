"""The engine step's own checks, without an engine: validation of its four tensors, settings (the in-flight budget:
tests/unit/test_engine_fairness.py)."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from packaging.version import Version

from python_backends.engine import (
    EngineLimits,
    EngineSettings,
    SequenceBatch,
    check_vllm_version,
)
from python_backends.errors import InvalidRequest
from python_backends.families import BiEncoder, CrossEncoder, Qwen3YesNo
from python_backends.families.base import ClassifierLogit, first_segment_b
from python_backends.families.bi_encoder import cosine_to_first
from python_backends.families.qwen3_yes_no import HF_OVERRIDES
from python_backends.triton_params import ConfigError, ModelParameters

LIMITS = EngineLimits(max_model_len=8, vocab_size=100, max_sequences=4, query_row=False)
BI_LIMITS = EngineLimits(max_model_len=8, vocab_size=100, max_sequences=4, query_row=True)


def arrays(ids, types, lengths, docs) -> dict[str, np.ndarray]:
    return {
        "TOKEN_IDS": np.array([ids], dtype=np.int32),
        "TOKEN_TYPE_IDS": np.array([types], dtype=np.int32),
        "SEQUENCE_LENGTHS": np.array([lengths], dtype=np.int32),
        "SEQUENCE_DOCUMENTS": np.array([docs], dtype=np.int32),
    }


GOOD = arrays([1, 2, 3, 4, 5, 6], [0, 0, 1, 0, 1, 1], [3, 1, 2], [0, 1, 1])


def test_a_valid_request_splits_by_lengths():
    batch = SequenceBatch.from_arrays(GOOD, LIMITS)
    ids, types = batch.split()
    assert [i.tolist() for i in ids] == [[1, 2, 3], [4], [5, 6]]
    assert [t.tolist() for t in types] == [[0, 0, 1], [0], [1, 1]]
    assert batch.tokens == 6 and batch.document_count == 2


@pytest.mark.parametrize("tokens, runs", [(6, [range(0, 3)]), (4, [range(0, 2), range(2, 3)]),
                                          (3, [range(0, 1), range(1, 3)]),
                                          (2, [range(0, 1), range(1, 2), range(2, 3)])])
def test_windows_run_consecutive_sequences_up_to_a_token_count(tokens, runs):
    batch = SequenceBatch.from_arrays(GOOD, LIMITS)  # sequences of 3, 1 and 2 tokens
    assert batch.windows(tokens) == runs


def test_document_scores_keep_the_best_window_and_skip_the_query():
    batch = SequenceBatch.from_arrays(arrays([1] * 5, [0] * 5, [1] * 5, [-1, 0, 1, 1, 2]), EngineLimits(8, 100, 8, True))
    best = batch.document_scores(np.array([0.1, 0.3, 0.9, -2.0], dtype=np.float32))
    np.testing.assert_array_equal(best, np.array([0.1, 0.9, -2.0], dtype=np.float32))


MALFORMED = {
    "two rows": ({**GOOD, "TOKEN_IDS": np.ones((2, 6), dtype=np.int32)}, LIMITS,
                 "TOKEN_IDS: expected shape [1, n], got [2, 6]"),
    "no sequences": (arrays([1], [0], [], []), LIMITS, "SEQUENCE_LENGTHS: 0 sequences, expected 1..4"),
    "too many sequences": (arrays([1] * 5, [0] * 5, [1] * 5, [0, 1, 2, 3, 4]), LIMITS,
                           "SEQUENCE_LENGTHS: 5 sequences, expected 1..4"),
    "owners disagree": (arrays([1, 2], [0, 0], [1, 1], [0]), LIMITS, "SEQUENCE_DOCUMENTS has 1 entries for 2 sequences"),
    "zero-length sequence": (arrays([1, 2], [0, 0], [2, 0], [0, 1]), LIMITS,
                             "SEQUENCE_LENGTHS: every sequence must hold 1..8 tokens (max_model_len), got 0..2"),
    "over max_model_len": (arrays([1] * 9, [0] * 9, [9], [0]), LIMITS,
                           "SEQUENCE_LENGTHS: every sequence must hold 1..8 tokens (max_model_len), got 9..9"),
    "negative length": (arrays([1, 2], [0, 0], [3, -1], [0, 1]), LIMITS,
                        "SEQUENCE_LENGTHS: every sequence must hold 1..8 tokens (max_model_len), got -1..3"),
    "lengths do not add up": (arrays([1, 2, 3], [0, 0, 0], [1, 1], [0, 1]), LIMITS,
                              "TOKEN_IDS (3), TOKEN_TYPE_IDS (3) and the sum of SEQUENCE_LENGTHS (2) disagree"),
    "types shorter": (arrays([1, 2], [0], [1, 1], [0, 1]), LIMITS,
                      "TOKEN_IDS (2), TOKEN_TYPE_IDS (1) and the sum of SEQUENCE_LENGTHS (2) disagree"),
    "id past the vocabulary": (arrays([1, 100], [0, 0], [2], [0]), LIMITS,
                               "TOKEN_IDS: ids must be in 0..99 (vocabulary), got 1..100"),
    "negative id": (arrays([-5, 1], [0, 0], [2], [0]), LIMITS, "TOKEN_IDS: ids must be in 0..99 (vocabulary), got -5..1"),
    "type 2": (arrays([1, 2], [0, 2], [2], [0]), LIMITS, "TOKEN_TYPE_IDS: values must be 0 or 1"),
    "segment B before A": (arrays([1, 2, 3], [1, 0, 0], [3], [0]), LIMITS,
                           "TOKEN_TYPE_IDS: within a sequence, segment A (0) must precede segment B (1)"),
    "query row for a cross-encoder": (arrays([1, 2], [0, 0], [1, 1], [-1, 0]), LIMITS,
                                      "SEQUENCE_DOCUMENTS: query rows (-1) must be none for this model"),
    "no query row for a bi-encoder": (arrays([1, 2], [0, 0], [1, 1], [0, 1]), BI_LIMITS,
                                      "SEQUENCE_DOCUMENTS: query rows (-1) must be exactly one, the first sequence for this model"),
    "only a query": (arrays([1], [0], [1], [-1]), BI_LIMITS,
                     "SEQUENCE_DOCUMENTS: document indices must be >= 0 and at least one is needed"),
    "negative document": (arrays([1, 2], [0, 0], [1, 1], [0, -3]), LIMITS,
                          "SEQUENCE_DOCUMENTS: document indices must be >= 0 and at least one is needed"),
    "50 million documents from 16 bytes": (arrays([1, 2], [0, 0], [1, 1], [0, 50_000_000]), LIMITS,
                                           "SEQUENCE_DOCUMENTS: document indices must cover 0..D-1 without gaps"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_requests_are_refused_with_the_tensor_named(case):
    tensors, limits, message = MALFORMED[case]
    with pytest.raises(InvalidRequest) as caught:
        SequenceBatch.from_arrays(tensors, limits)
    assert str(caught.value) == message


def test_segment_b_start_and_cosine():
    assert first_segment_b(np.array([0, 0, 0, 1, 1])) == 3
    assert first_segment_b(np.zeros(4, dtype=np.int32)) is None
    vectors = np.array([[3.0, 4.0], [6.0, 8.0], [-4.0, 3.0], [0.0, 0.0]], dtype=np.float32)
    np.testing.assert_allclose(cosine_to_first(vectors), [1.0, 0.0, 0.0], atol=1e-7)


@pytest.mark.parametrize(
    ("release", "segment_b"), [("0.24.0", 2), ("0.32.0", 2), ("0.33.0", (2, 5)), ("0.34.0", (2, 5))]
)
def test_classifier_params_carry_segment_b_in_the_form_of_the_vllm_release(release, segment_b):
    kind = ClassifierLogit(dict, Version(release))  # dict: the PoolingParams keyword arguments as they are passed
    assert kind.params(np.array([0, 0, 1, 1, 1])) == {
        "task": "classify", "use_activation": False, "extra_kwargs": {"compressed_token_type_ids": segment_b},
    }
    no_segment_b = kind.params(np.zeros(4, dtype=np.int32))
    assert no_segment_b == {"task": "classify", "use_activation": False, "extra_kwargs": None}


def settings_from(engine_args: str) -> EngineSettings:
    values = {"engine_args": engine_args, "max_inflight_tokens": "1000", "max_sequences": "16",
              "drain_timeout_seconds": "5", "vllm_env": "{}", "model_sha256": "{}"}
    return EngineSettings.from_parameters(ModelParameters("rerank_engine", values))


def test_engine_args_pass_whole_with_only_the_model_resolved():
    settings = settings_from('{"model": "org/model", "runner": "pooling", "dtype": "bfloat16", "max_num_seqs": 7}')
    assert settings.vllm_args("/models/org-model", CrossEncoder) == {
        "model": "/models/org-model", "runner": "pooling", "dtype": "bfloat16", "max_num_seqs": 7,
    }
    assert settings.max_inflight_tokens == 1000 and settings.max_sequences == 16 and settings.drain_timeout_s == 5.0


def test_a_family_requirement_is_checked_not_added():
    settings = settings_from('{"model": "Qwen/Qwen3-Reranker-0.6B", "runner": "pooling"}')
    with pytest.raises(ConfigError) as caught:
        settings.vllm_args("/m", Qwen3YesNo)
    assert str(caught.value) == (
        f"rerank_engine: a yes_no_reranker model needs engine_args \"hf_overrides\": {HF_OVERRIDES!r}, got None"
    )
    with pytest.raises(ConfigError, match="needs engine_args \"runner\": 'pooling', got 'generate'"):
        settings_from('{"model": "m", "runner": "generate"}').vllm_args("/m", BiEncoder)
    with pytest.raises(ConfigError, match='engine_args has no "model"'):
        settings_from('{"runner": "pooling"}')


@pytest.mark.parametrize("version", ["0.24.0", "0.24.0+nv26.07", "0.26.0", "0.27.1", "0.32.0", "0.33.0", "0.34.0"])
def test_checked_vllm_versions_load_quietly(version, caplog):
    with caplog.at_level(logging.WARNING):
        assert check_vllm_version(version) == Version(version.split("+")[0])
    assert caplog.records == []


@pytest.mark.parametrize("version", ["0.35.0", "0.35.0rc1", "1.0.0"])
def test_a_newer_vllm_loads_with_a_warning_naming_the_checked_range(version, caplog):
    with caplog.at_level(logging.WARNING):
        assert check_vllm_version(version) == Version(Version(version).base_version)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [(
        "python_backends.engine.settings", logging.WARNING,
        f"rerank_engine is checked against vLLM >= 0.24.0, < 0.35.0; this environment has vLLM {version}, newer: "
        "loading it unchecked",
    )]


@pytest.mark.parametrize("version", ["0.23.0", "0.22.1", "0.19.0"])
def test_an_older_vllm_is_refused(version):
    with pytest.raises(ConfigError) as caught:
        check_vllm_version(version)
    assert str(caught.value) == (
        f"rerank_engine needs vLLM >= 0.24.0 (checked: >= 0.24.0, < 0.35.0); this environment has vLLM {version}"
    )
