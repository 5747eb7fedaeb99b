"""The real Qwen3 BPE tokenizer rebuilt offline (benchmarks/qwen3_tokenizer.py) and the Qwen3-Reranker prompt
tokenized with it: the exact ids the model card's template gives, the two answer ids the engine scores, and the
preprocess step's encoder producing prefix + query block + document + suffix with them.

The tokenizer is built once (~20 s on 2 cores) and cached under build/qwen3-tokenizer/."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from benchmarks import qwen3_tokenizer
from python_backends.families.qwen3_yes_no import QWEN3_PREFIX, QWEN3_SUFFIX, Qwen3YesNoPrompts, qwen3_reranker_prompt

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


def test_preprocess_encoder_builds_the_exact_prompt_ids(tokenizer_dir, tok):
    encoder = Qwen3YesNoPrompts(str(tokenizer_dir), max_model_len=1024)
    document = "A reranker scores each query-document pair with a cross-encoder."
    encoded = encoder.encode("what is a reranker?", [document, "Second one."], None)
    # As the model card: prefix ids + ids of "<Instruct>: ...<Document>: {doc}" tokenized whole + suffix ids, so the
    # space after "<Document>:" joins the document's first word (" A" = 362) instead of standing alone (220).
    body = QUERY_BLOCK_IDS[:-1] + [362] + ids(tok, document)[1:]
    assert encoded.token_ids[0] == PREFIX_IDS + body + SUFFIX_IDS
    assert encoded.token_ids[1] == PREFIX_IDS + QUERY_BLOCK_IDS[:-1] + ids(tok, " Second one.") + SUFFIX_IDS
    assert encoded.document_index == [0, 1]
    assert encoded.truncated == 0
