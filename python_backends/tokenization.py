"""Turn one request (query, documents, instruction) into token sequences that fit `max_model_len`.

Works on the Rust `tokenizers` backend directly: it batches the documents, truncates an encoding in
place and applies the model's own special-token template (`post_process`), the same on transformers 4
and 5. A document that does not fit is cut (the query, the template and its suffix stay whole) or, in window
mode (`window_overlap` set), split into overlapping windows that are scored separately; the engine keeps the
best window's score per document.
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
    """All sequences of one request, in order, the document each belongs to (-1: the query) and how many
    documents did not fit whole (cut, or split into windows)."""

    token_ids: list[list[int]]
    document_index: list[int]
    token_type_ids: list[list[int]] | None = None
    truncated: int = 0
    lengths: list[int] = field(init=False)

    def __post_init__(self) -> None:
        self.lengths = [len(ids) for ids in self.token_ids]


class RequestEncoder(Protocol):
    family: ModelFamily
    takes_instruction: bool

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest: ...


class LongDocuments:
    """What to do with a document longer than its token budget: cut it, or split it into windows."""

    def __init__(self, window_overlap: int | None = None) -> None:
        if window_overlap is not None and window_overlap < 0:
            raise ValueError(f"window_overlap must be >= 0, got {window_overlap}")
        self.window_overlap = window_overlap

    def fit(self, encoding: Encoding, budget: int) -> tuple[list[Encoding], bool]:
        """The encoding(s) to score for one document, and whether it had to be cut or split."""
        if len(encoding.ids) <= budget:
            return [encoding], False
        if self.window_overlap is None:
            encoding.truncate(budget)
            return [encoding], True
        encoding.truncate(budget, stride=min(self.window_overlap, budget - 1))
        return [encoding, *encoding.overflowing], True

    def fit_ids(self, ids: list[int], budget: int) -> tuple[list[list[int]], bool]:
        """The same on a plain id list (the Qwen3 body, whose head is kept outside the windows)."""
        if len(ids) <= budget:
            return [ids], False
        if self.window_overlap is None:
            return [ids[:budget]], True
        step = budget - min(self.window_overlap, budget - 1)
        starts = range(0, max(len(ids) - budget, 0) + step, step)
        return [ids[start:start + budget] for start in starts if start < len(ids)], True


def _backend(model: str) -> Tokenizer:
    """A private copy of the fast tokenizer with padding and truncation off: we place every cut ourselves."""
    tokenizer = AutoTokenizer.from_pretrained(model)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{model}: a fast (Rust) tokenizer is required, tokenizer.json is missing")
    backend = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
    backend.no_padding()
    backend.no_truncation()
    return backend


def _query_budget_error(query_tokens: int, room: int) -> QueryTooLongError:
    return QueryTooLongError(
        f"the query takes {query_tokens} tokens with the template; max_model_len leaves {room}: shorten the query"
    )


class CrossEncoderPairs:
    """`[CLS] query [SEP] document [SEP]` with token types, from the tokenizer's own pair template."""

    family = ModelFamily.CROSS_ENCODER
    takes_instruction = False

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        self._tok = _backend(model)
        self._max_len = max_model_len
        self._long = long_documents or LongDocuments()  # default: cut
        self._specials = self._tok.num_special_tokens_to_add(is_pair=True)

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest:
        query_enc = self._tok.encode(query, add_special_tokens=False)
        budget = self._max_len - self._specials - len(query_enc.ids)
        if budget < 1:
            raise _query_budget_error(len(query_enc.ids) + self._specials, self._max_len)
        ids, types, owners, truncated = [], [], [], 0
        for index, doc_enc in enumerate(self._tok.encode_batch(documents, add_special_tokens=False)):
            pieces, cut = self._long.fit(doc_enc, budget)
            truncated += cut
            for piece in pieces:
                pair = self._tok.post_process(query_enc, piece, add_special_tokens=True)
                ids.append(pair.ids)
                types.append(pair.type_ids)
                owners.append(index)
        return EncodedRequest(ids, owners, types, truncated)


class Qwen3YesNoPrompts:
    """The Qwen3-Reranker chat prompt; tokenized as the model card does (prefix, body, suffix apart)."""

    family = ModelFamily.YES_NO_RERANKER
    takes_instruction = True

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        self._tok = _backend(model)
        self._max_len = max_model_len
        self._long = long_documents or LongDocuments()  # default: cut
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
        ids, owners, truncated = [], [], 0
        for index, body in enumerate(bodies):
            # The body ends with the document: only the part after the query head is cut or windowed.
            head, document = body.ids[:head_tokens], body.ids[head_tokens:]
            pieces, cut = self._long.fit_ids(document, budget - head_tokens)
            truncated += cut
            for piece in pieces:
                ids.append(self._prefix + head + piece + self._suffix)
                owners.append(index)
        return EncodedRequest(ids, owners, None, truncated)


class BiEncoderTexts:
    """The query once, then each document, each with the model's single-sequence specials."""

    family = ModelFamily.BI_ENCODER
    takes_instruction = False

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        self._tok = _backend(model)
        self._long = long_documents or LongDocuments()  # default: cut
        self._budget = max_model_len - self._tok.num_special_tokens_to_add(is_pair=False)

    def encode(self, query: str, documents: list[str], instruction: str | None) -> EncodedRequest:
        query_enc = self._tok.encode(query, add_special_tokens=False)
        if len(query_enc.ids) > self._budget:
            raise _query_budget_error(len(query_enc.ids), self._budget)
        ids, owners, truncated = [self._tok.post_process(query_enc, add_special_tokens=True).ids], [-1], 0
        for index, doc_enc in enumerate(self._tok.encode_batch(documents, add_special_tokens=False)):
            pieces, cut = self._long.fit(doc_enc, self._budget)
            truncated += cut
            for piece in pieces:
                ids.append(self._tok.post_process(piece, add_special_tokens=True).ids)
                owners.append(index)
        return EncodedRequest(ids, owners, None, truncated)


_ENCODERS: dict[ModelFamily, type] = {
    ModelFamily.CROSS_ENCODER: CrossEncoderPairs,
    ModelFamily.YES_NO_RERANKER: Qwen3YesNoPrompts,
    ModelFamily.BI_ENCODER: BiEncoderTexts,
}


def make_encoder(
    family: ModelFamily, model: str, max_model_len: int, window_overlap: int | None = None
) -> RequestEncoder:
    """The encoder for a model family, e.g. `make_encoder(detect_model(path).family, path, 512)`;
    `window_overlap` (tokens shared by neighbouring windows) switches long documents from cutting to windows."""
    return _ENCODERS[family](model, max_model_len, LongDocuments(window_overlap))
