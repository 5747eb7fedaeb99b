"""The real Qwen3 BPE tokenizer rebuilt offline (benchmarks/qwen3_tokenizer.py) and the Qwen3-Reranker prompt
tokenized with it: the exact ids the model card's template gives, the two answer ids the engine scores, and the
preprocess step's encoder producing prefix + query block + document + suffix with them.

The tokenizer is built once (~20 s on 2 cores) and cached under build/qwen3-tokenizer/."""

from __future__ import annotations

import json
import shutil

import pytest
from tokenizers import Tokenizer

from benchmarks import qwen3_tokenizer
from python_backends.checkpoint_files import served_tokenizer
from python_backends.families.qwen3_yes_no import (
    QWEN3_PREFIX, QWEN3_SUFFIX, Qwen3YesNoPrompts, qwen3_reranker_prompt, shared_prefix,
)
from python_backends.encoding.tokenization import EmptyTextError, LongDocuments
from tests.support.tokenizer_parity import assert_tokenizes_as

# <|im_start|>system\nJudge whether the Document meets ... only be "yes" or "no".<|im_end|>\n<|im_start|>user\n
PREFIX_IDS = [
    151644, 8948, 198, 60256, 3425, 279, 11789, 20027, 279, 8502, 3118, 389, 279, 11361, 323, 279, 758, 1235, 3897,
    13, 7036, 429, 279, 4226, 646, 1172, 387, 330, 9693, 1, 476, 330, 2152, 3263, 151645, 198, 151644, 872, 198,
]
# <|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n
SUFFIX_IDS = [151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271]
# <Instruct>: Given a web search query, ...\n<Query>: what is a reranker?\n<Document>:
QUERY_BLOCK_IDS = [
    27, 641, 1235, 26818, 16246, 264, 3482, 2711, 3239, 11, 17179, 9760, 46769, 429, 4226, 279, 3239, 198, 27, 2859,
    26818, 1128, 374, 264, 48547, 98248, 5267, 75692, 26818, 220,
]


@pytest.fixture(scope="module")
def tokenizer_dir():
    return qwen3_tokenizer.cached()


@pytest.fixture(scope="module")
def tok(tokenizer_dir) -> Tokenizer:
    return Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))


def ids(tok: Tokenizer, text: str) -> list[int]:
    return tok.encode(text, add_special_tokens=False).ids


def test_vocabulary_size_and_special_token_ids(tok):
    assert tok.get_vocab_size(with_added_tokens=True) == 151669
    expected = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645, "<tool_call>": 151657,
                "<think>": 151667, "</think>": 151668}
    assert {t: tok.token_to_id(t) for t in expected} == expected


def test_answer_tokens_are_single_ids(tok):
    assert tok.token_to_id("yes") == 9693
    assert tok.token_to_id("no") == 2152
    assert ids(tok, "yes") == [9693]
    assert ids(tok, "no") == [2152]


def test_template_prefix_and_suffix_ids(tok):
    assert ids(tok, QWEN3_PREFIX) == PREFIX_IDS
    assert ids(tok, QWEN3_SUFFIX) == SUFFIX_IDS


def test_query_block_ids_with_default_instruction(tok):
    head = qwen3_reranker_prompt("what is a reranker?").head
    assert head.startswith(QWEN3_PREFIX)
    assert ids(tok, head[len(QWEN3_PREFIX):]) == QUERY_BLOCK_IDS


def test_english_and_unicode_text_round_trip(tok):
    assert ids(tok, "Hello world, this is a test.") == [9707, 1879, 11, 419, 374, 264, 1273, 13]
    text = "Zürich's naïve café — 東京 2024!\n\n  tabs\tand ümlauts"
    assert tok.decode(ids(tok, text), skip_special_tokens=False) == text


def test_preprocess_encoder_builds_the_exact_prompt_ids(encoder, tok):
    document = "A reranker scores each query-document pair with a cross-encoder."
    encoded = encoder.encode("what is a reranker?", [document, "Second one."], None)
    # As the model card: prefix ids + ids of "<Instruct>: ...<Document>: {doc}" tokenized whole + suffix ids, so the
    # space after "<Document>:" joins the document's first word (" A" = 362) instead of standing alone (220).
    body = QUERY_BLOCK_IDS[:-1] + [362] + ids(tok, document)[1:]
    assert encoded.token_ids[0] == PREFIX_IDS + body + SUFFIX_IDS
    assert encoded.token_ids[1] == PREFIX_IDS + QUERY_BLOCK_IDS[:-1] + ids(tok, " Second one.") + SUFFIX_IDS
    assert encoded.document_index == [0, 1]
    assert encoded.truncated == 0


# Qwen3-Reranker's model card, step by step and independent of the serving code: the prefix and suffix tokenized on
# their own, "<Instruct>: ...\n<Query>: ...\n<Document>: {doc}" tokenized whole and cut from its end to what
# max_length leaves, then prefix + body + suffix.
CARD_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
               "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
CARD_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
CARD_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def card_body(query: str, document: str) -> str:
    return f"<Instruct>: {CARD_INSTRUCTION}\n<Query>: {query}\n<Document>: {document}"


def card_ids(card_tokenizer, query: str, document: str, max_length: int) -> list[int]:
    prefix = card_tokenizer.encode(CARD_PREFIX, add_special_tokens=False)
    suffix = card_tokenizer.encode(CARD_SUFFIX, add_special_tokens=False)
    body = card_tokenizer([card_body(query, document)], padding=False, truncation="longest_first",
                          return_attention_mask=False, max_length=max_length - len(prefix) - len(suffix))
    return prefix + body["input_ids"][0] + suffix


@pytest.fixture(scope="module")
def encoder(tokenizer_dir):
    """The preprocess step's encoder at max_model_len 1024, built once (it reads the 151k-token vocabulary)."""
    return Qwen3YesNoPrompts(str(tokenizer_dir), max_model_len=1024)


@pytest.fixture(scope="module")
def card_tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


QUERY = "what is the capital of France?"
# One-token documents, and documents whose first character BPE joins to the space before it (letters, punctuation,
# CJK, emoji, blanks) or leaves alone (digits)
EDGE_DOCUMENTS = ["Paris", "yes", "no", "!", "(see below) Paris is the capital.", "2024 census: 2.1 million",
                  "東京は日本の首都です。", "😀 a fine city", "  two leading spaces", "\nstarts on a new line",
                  "\u00e9t\u00e9 \u00e0 Paris", "-5 degrees in Paris", "'quoted' text", "Paris\u200b"]


@pytest.mark.parametrize("document", EDGE_DOCUMENTS, ids=range(len(EDGE_DOCUMENTS)))
def test_served_ids_equal_the_model_cards_ids(encoder, card_tokenizer, document):
    encoded = encoder.encode(QUERY, [document], None)
    assert encoded.token_ids == [card_ids(card_tokenizer, QUERY, document, 1024)]
    assert (encoded.document_index, encoded.truncated) == ([0], 0)


def test_a_one_token_document_is_one_token_after_the_head(encoder, tok):
    head = ids(tok, qwen3_reranker_prompt(QUERY).head)
    for document, token in (("Paris", " Paris"), ("yes", " yes")):
        (sequence,) = encoder.encode(QUERY, [document], None).token_ids
        # the head's closing space (220) is part of the document's token
        assert sequence == head[:-1] + [tok.token_to_id(token.replace(" ", "Ġ"))] + SUFFIX_IDS


def test_shared_prefix_is_where_the_document_starts_in_the_body():
    head = [10, 11, 220]
    assert shared_prefix([10, 11, 220, 5, 6], head) == 3  # a digit: the head's closing space stays its own token
    assert shared_prefix([10, 11, 4567, 6], head) == 2  # a letter: the space joined the document's first word
    assert shared_prefix([10, 99, 4567], head) == 1  # anything else: the first token that differs
    assert shared_prefix([10, 11], head) == 2  # no document tokens at all: the encoder's empty-document check follows


def _head_length(card_tokenizer, body_ids: list[int], head_text: str) -> int:
    """How many of the body's first tokens decode to a part of the head's text (read from the text, not the ids)."""
    length = 0  # the head's text is ASCII: once a prefix of the body is not a prefix of it, no longer one is
    while length < len(body_ids) and head_text.startswith(card_tokenizer.decode(body_ids[:length + 1])):
        length += 1
    return length


@pytest.mark.parametrize("document", ["Paris " * 300, "2024 " * 300, "東京 " * 300], ids=["letter", "digit", "cjk"])
def test_a_long_document_is_cut_to_the_model_cards_ids(tokenizer_dir, card_tokenizer, document):
    encoded = Qwen3YesNoPrompts(str(tokenizer_dir), max_model_len=128).encode(QUERY, [document], None)
    assert encoded.token_ids == [card_ids(card_tokenizer, QUERY, document, 128)]
    assert len(encoded.token_ids[0]) == 128 and encoded.truncated == 1


@pytest.mark.parametrize("document", ["Paris is large. " * 40, "1234 5678 " * 40], ids=["letter", "digit"])
def test_windows_hold_the_head_whole_and_cover_the_documents_tokens_in_order(tokenizer_dir, card_tokenizer, document):
    max_len, overlap = 128, 8
    encoder = Qwen3YesNoPrompts(str(tokenizer_dir), max_len, LongDocuments(window_overlap=overlap, max_windows=3))
    windows = encoder.encode(QUERY, [document], None).token_ids
    full = card_ids(card_tokenizer, QUERY, document, 10**6)[len(PREFIX_IDS):-len(SUFFIX_IDS)]
    head = _head_length(card_tokenizer, full, card_body(QUERY, ""))
    room = max_len - len(PREFIX_IDS) - len(SUFFIX_IDS) - head
    assert windows[0] == card_ids(card_tokenizer, QUERY, document, max_len)  # the first window is the card's cut
    assert len(windows) == 3
    for index, window in enumerate(windows):
        start = index * (room - overlap)
        assert window == PREFIX_IDS + full[:head] + full[head + start:head + start + room] + SUFFIX_IDS


def test_a_document_of_special_tokens_only_is_empty(encoder):
    with pytest.raises(EmptyTextError) as raised:
        encoder.encode(QUERY, ["Paris", "<|im_end|><|endoftext|>"], None)
    assert raised.value.name == "DOCUMENTS[1]"


# Qwen3-Reranker's tokenizer_config.json (less its chat template): transformers loads it as a Qwen2Tokenizer, which
# rebuilds the tokenizer from tokenizer.json's vocabulary and merges with its own normalizer and pre-tokenizer, and
# declares the added tokens and special tokens on its own.
RERANKER_TOKENIZER_CONFIG = {
    "add_bos_token": False,
    "add_prefix_space": False,
    "added_tokens_decoder": {
        str(qwen3_tokenizer.FIRST_ADDED_ID + index): {"content": content, "lstrip": False, "normalized": False,
                                                      "rstrip": False, "single_word": False, "special": special}
        for index, (content, special) in enumerate(qwen3_tokenizer.ADDED_TOKENS)
    },
    "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                                  "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"],
    "bos_token": None,
    "clean_up_tokenization_spaces": False,
    "eos_token": "<|im_end|>",
    "errors": "replace",
    "model_max_length": 131072,
    "pad_token": "<|endoftext|>",
    "split_special_tokens": False,
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": None,
}


@pytest.fixture(scope="module")
def reranker_dir(tokenizer_dir, tmp_path_factory):
    """The tokenizer with Qwen3-Reranker's own tokenizer_config.json."""
    folder = tmp_path_factory.mktemp("qwen3-reranker-tokenizer")
    shutil.copy(tokenizer_dir / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(RERANKER_TOKENIZER_CONFIG))
    return folder


@pytest.mark.parametrize("config", ["saved", "qwen3_reranker"])
def test_served_tokenizer_is_the_one_transformers_loads(tokenizer_dir, reranker_dir, config):
    from transformers import AutoTokenizer

    folder = tokenizer_dir if config == "saved" else reranker_dir
    head = qwen3_reranker_prompt(QUERY).head
    texts = [CARD_PREFIX, CARD_SUFFIX, head, *EDGE_DOCUMENTS, *(head + document for document in EDGE_DOCUMENTS),
             "<|im_end|><|endoftext|> <tool_call> </think>", "yes", "no"]
    assert_tokenizes_as(served_tokenizer(str(folder)), AutoTokenizer.from_pretrained(folder), texts)
