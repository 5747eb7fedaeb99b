"""Turn one request (query, documents, instruction) into token sequences that fit `max_model_len`.

Works on the Rust `tokenizers` backend directly: it batches the documents, truncates an encoding in
place and applies the model's own special-token template (`post_process`), the same on transformers 4
and 5. Truncation always cuts the document: the query, the template and its suffix stay whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tokenizers import Encoding, Tokenizer
from transformers import AutoTokenizer

from .model_family import ModelFamily
from .prompts import QWEN3_PREFIX, qwen3_reranker_prompt


class QueryTooLongError(ValueError):
    """The query and template alone leave no room for a document."""


@dataclass
class EncodedRequest:
    """All sequences of one request, in order, and how many documents had to be cut."""

    token_ids: list[list[int]]
    token_type_ids: list[list[int]] | None = None
    truncated: int = 0
    lengths: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.lengths = [len(ids) for ids in self.token_ids]


class RequestEncoder(Protocol):
    family: ModelFamily
    takes_instruction: bool

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest: ...


def _backend(model: str) -> Tokenizer:
    """A private copy of the fast tokenizer with padding and truncation off: we place every cut ourselves."""
    tokenizer = AutoTokenizer.from_pretrained(model)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{model}: a fast (Rust) tokenizer is required, tokenizer.json is missing")
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    return backend


def _cut(encoding: Encoding, budget: int) -> bool:
    """Truncate in place to `budget` tokens; report whether anything was cut."""
    if len(encoding.ids) <= budget:
        return False
    encoding.truncate(budget)
    return True


def _query_budget_error(query_tokens: int, room: int) -> QueryTooLongError:
    return QueryTooLongError(
        f"the query takes {query_tokens} tokens with the template; max_model_len leaves {room}: shorten the query"
    )


class CrossEncoderPairs:
    """`[CLS] query [SEP] document [SEP]` with token types, from the tokenizer's own pair template."""

    family = ModelFamily.CROSS_ENCODER
    takes_instruction = False

    def __init__(self, model: str, max_model_len: int) -> None:
        self._tok = _backend(model)
        self._max_len = max_model_len
        self._specials = self._tok.num_special_tokens_to_add(is_pair=True)

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest:
        query_enc = self._tok.encode(query, add_special_tokens=False)
        budget = self._max_len - self._specials - len(query_enc.ids)
        if budget < 1:
            raise _query_budget_error(len(query_enc.ids) + self._specials, self._max_len)
        ids, types, truncated = [], [], 0
        for doc_enc in self._tok.encode_batch(documents, add_special_tokens=False):
            truncated += _cut(doc_enc, budget)
            pair = self._tok.post_process(query_enc, doc_enc, add_special_tokens=True)
            ids.append(pair.ids)
            types.append(pair.type_ids)
        return EncodedRequest(ids, types, truncated)


class Qwen3YesNoPrompts:
    """The Qwen3-Reranker chat prompt; tokenized as the model card does (prefix, body, suffix apart)."""

    family = ModelFamily.YES_NO_RERANKER
    takes_instruction = True

    def __init__(self, model: str, max_model_len: int) -> None:
        self._tok = _backend(model)
        self._max_len = max_model_len
        self._prefix = self._tok.encode(QWEN3_PREFIX, add_special_tokens=False).ids
        self._suffix = self._tok.encode(qwen3_reranker_prompt("").suffix, add_special_tokens=False).ids

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest:
        prompt = qwen3_reranker_prompt(query, instruction)
        body_head = prompt.head[len(QWEN3_PREFIX):]
        head_tokens = len(self._tok.encode(body_head, add_special_tokens=False).ids)
        budget = self._max_len - len(self._prefix) - len(self._suffix)
        if budget - head_tokens < 1:
            raise _query_budget_error(head_tokens + len(self._prefix) + len(self._suffix), self._max_len)
        bodies = self._tok.encode_batch([body_head + doc for doc in documents], add_special_tokens=False)
        ids, truncated = [], 0
        for body in bodies:
            truncated += _cut(body, budget)  # the body ends with the document: cutting its end cuts the document
            ids.append(self._prefix + body.ids + self._suffix)
        return EncodedRequest(ids, None, truncated)


class BiEncoderTexts:
    """The query once, then each document, each with the model's single-sequence specials."""

    family = ModelFamily.BI_ENCODER
    takes_instruction = False

    def __init__(self, model: str, max_model_len: int) -> None:
        self._tok = _backend(model)
        self._budget = max_model_len - self._tok.num_special_tokens_to_add(is_pair=False)

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest:
        query_enc = self._tok.encode(query, add_special_tokens=False)
        if len(query_enc.ids) > self._budget:
            raise _query_budget_error(len(query_enc.ids), self._budget)
        ids = [self._tok.post_process(query_enc, add_special_tokens=True).ids]
        truncated = 0
        for doc_enc in self._tok.encode_batch(documents, add_special_tokens=False):
            truncated += _cut(doc_enc, self._budget)
            ids.append(self._tok.post_process(doc_enc, add_special_tokens=True).ids)
        return EncodedRequest(ids, None, truncated)


_ENCODERS: dict[ModelFamily, type] = {
    ModelFamily.CROSS_ENCODER: CrossEncoderPairs,
    ModelFamily.YES_NO_RERANKER: Qwen3YesNoPrompts,
    ModelFamily.BI_ENCODER: BiEncoderTexts,
}


def make_encoder(family: ModelFamily, model: str, max_model_len: int) -> RequestEncoder:
    """The encoder for a model family, e.g. `make_encoder(detect_model(path).family, path, 512)`."""
    return _ENCODERS[family](model, max_model_len)
