"""The served tokenizer (python_backends.checkpoint_files, built without transformers) against transformers'
AutoTokenizer, the tokenizer a model card's recipe uses: the same ids for every text alone and for every pair of
neighbouring texts, with and without the special-token template, and the same added tokens."""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer


def added_tokens(decoder: dict[int, Any]) -> dict[int, tuple[str, bool]]:
    return {index: (token.content, token.special) for index, token in decoder.items()}


def assert_tokenizes_as(served: Tokenizer, reference: Any, texts: list[str]) -> None:
    for text in texts:
        for specials in (False, True):
            expected = reference(text, add_special_tokens=specials)["input_ids"]
            assert served.encode(text, add_special_tokens=specials).ids == expected, (text, specials)
    paired = [text for text in texts if text]  # transformers takes an empty second text for none
    for first, second in zip(paired, paired[1:]):
        encoding, expected = served.encode(first, second), reference(first, second)
        assert encoding.ids == expected["input_ids"], (first, second)
        if "token_type_ids" in expected:
            assert encoding.type_ids == expected["token_type_ids"], (first, second)
    assert added_tokens(served.get_added_tokens_decoder()) == added_tokens(reference.added_tokens_decoder)
