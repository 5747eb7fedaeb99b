"""What every family's encoder shares to turn one request (query, documents, instruction) into token sequences that
fit `max_model_len`; each family's own encoder (python_backends/families) says how a pair is laid out.

Works on the Rust `tokenizers` backend directly (python_backends.checkpoint_files builds it from the checkpoint's
tokenizer.json as transformers' AutoTokenizer does, without importing transformers): it batches the documents and
reads each one's ids once; a family lays its sequences out from ids by the model's own special-token template, read
once from the tokenizer (`post_process`). Qwen3's encoder tokenizes its documents on the tokenizer's tiktoken twin
where one gives the same ids for every text (python_backends.encoding.fast_bpe: ~1/5 of the time). A document that
does not fit is cut (the query, the template and its suffix stay whole) or, in window mode (`window_overlap` set),
split into overlapping windows that are scored separately; the engine keeps the best window's score per document.

Work is bounded before it is spent: a document is tokenized only as far as its token budget can use (the text is
cut to a safe multiple of the budget in characters first, then tokenized; see `BoundedTokenizer`), so a 64 KB
document costs what its first few thousand characters cost.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sized
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from tokenizers import Encoding, Tokenizer

from ..checkpoint_files import served_tokenizer


class QueryTooLongError(ValueError):
    """The query and template alone leave no room for a document."""


class EmptyTextError(ValueError):
    """A query or document that tokenizes to nothing, or to special tokens other than the unknown one; `name` is its
    tensor name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


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


def flatten_documents(documents: list[tuple[list[list[int]], bool]]) -> tuple[list[list[int]], list[int], int]:
    """Each document's sequences and whether it did not fit whole -> all sequences in order, the document each
    belongs to, and how many documents did not fit whole (EncodedRequest's truncated)."""
    sequences, owners = [], []
    for index, (pieces, cut) in enumerate(documents):
        sequences.extend(pieces)
        owners.extend([index] * len(pieces))
    return sequences, owners, sum(cut for _, cut in documents)


class RequestEncoder(Protocol):
    takes_instruction: bool

    def encode(
        self, query: str, documents: list[str], instruction: str | None, max_tokens_per_doc: int | None = None
    ) -> EncodedRequest: ...

    def document_span(self, max_tokens_per_doc: int | None = None) -> int:
        """The most tokens of one document this encoder looks at (admission's upper bound per document)."""
        ...


class LongDocuments:
    """What to do with a document longer than its token budget: cut it, or split it into at most `max_windows`
    overlapping windows. `cap` (the request's MAX_TOKENS_PER_DOC) cuts the document first, in both modes."""

    def __init__(self, window_overlap: int | None = None, max_windows: int | None = None) -> None:
        if window_overlap is not None and window_overlap < 0:
            raise ValueError(f"window_overlap must be >= 0, got {window_overlap}")
        if max_windows is not None and max_windows < 1:
            raise ValueError(f"max_windows must be >= 1, got {max_windows}")
        self.window_overlap = window_overlap
        self.max_windows = 1 if window_overlap is None else max_windows  # None: as many windows as the text needs

    def _step(self, budget: int) -> int:
        return budget - min(self.window_overlap or 0, budget - 1)

    def span(self, budget: int, cap: int | None = None) -> int:
        """The most document tokens that can reach the engine: what tokenization must look at, and no more."""
        reach = sys.maxsize if self.max_windows is None else budget + (self.max_windows - 1) * self._step(budget)
        return reach if cap is None else min(reach, cap)

    def fit(self, ids: list[int], budget: int, cap: int | None = None) -> tuple[list[list[int]], bool]:
        """The id list(s) to score for one document, and whether it had to be cut or split."""
        span = self.span(budget, cap)
        cut = len(ids) > span
        ids = ids[:span]
        if len(ids) <= budget:
            return [ids], cut
        if self.window_overlap is None:
            return [ids[:budget]], True
        step = self._step(budget)
        starts = range(0, max(len(ids) - budget, 0) + step, step)
        return [ids[start:start + budget] for start in starts if start < len(ids)], True


Tokens = TypeVar("Tokens", bound=Sized)  # one text's tokens as a batch tokenizer gives them: an Encoding, or its ids


def encodings_of(tokenizer: Tokenizer) -> Callable[[list[str]], list[Encoding]]:
    """The batch tokenizer of `tokenizer`: each text's Encoding, without special tokens."""
    # _fast: no character offsets (nothing here reads them), ~20% less time than encode_batch
    return functools.partial(tokenizer.encode_batch_fast, add_special_tokens=False)


def ids_of(tokenizer: Tokenizer) -> Callable[[list[str]], list[list[int]]]:
    """The batch tokenizer of `tokenizer`: each text's ids, without special tokens. The families lay their sequences
    out from ids, read once: an Encoding builds a new list at every read of its ids."""
    encodings = encodings_of(tokenizer)
    return lambda texts: [encoding.ids for encoding in encodings(texts)]


class BoundedTokenizer(Generic[Tokens]):
    """Tokenize texts only as far as `keep` tokens of each can be used, reading at most
    `(keep + MARGIN) * MAX_CHARS_PER_TOKEN` characters of each.

    Each text is cut to `(keep + MARGIN) * CHARS_PER_TOKEN` characters and tokenized. The result stands when the
    text was whole or when it still gave more than `keep + MARGIN // 2` tokens: the kept tokens then end at least
    MARGIN // 2 tokens (whole words) before the cut, where the cut cannot change them. Otherwise (mostly
    whitespace, very long words) the limit grows 4x and only those texts are tokenized again, up to
    MAX_CHARS_PER_TOKEN characters a token: text with fewer tokens than that (a 120-letter word is one unknown token)
    is scored on its first characters (after leading blanks), so the time per admitted token stays bounded (tokenizing
    costs by characters). `encode_batch` tokenizes a list of texts without special tokens: `ids_of(tokenizer)`, or a
    tiktoken twin's ids (python_backends.encoding.fast_bpe).
    """

    CHARS_PER_TOKEN = 6  # English averages ~4-5 characters a token (MiniLM, Qwen3): one cut serves most text
    MAX_CHARS_PER_TOKEN = 24  # the last round's cut: 6 then 24 characters a token, ~30 x (keep + MARGIN) read in all
    MARGIN = 32

    def __init__(self, encode_batch: Callable[[list[str]], list[Tokens]]) -> None:
        self._encode_batch = encode_batch

    def encode_batch(
        self, texts: list[str], keep: int, head: str = "", head_tokens: int = 0
    ) -> tuple[list[Tokens], list[bool]]:
        """The tokens of `head + text` (no special tokens), and whether each text was read only in part. The part
        after `head_tokens` is whole, longer than `keep` tokens (its first `keep` are those of the whole text) or,
        at the character cap, the tokens of the text's first characters: a text read in part is always cut."""
        results: list[Tokens | None] = [None] * len(texts)
        partial = [False] * len(texts)
        pending, limit = list(range(len(texts))), (keep + self.MARGIN) * self.CHARS_PER_TOKEN
        last = (keep + self.MARGIN) * self.MAX_CHARS_PER_TOKEN
        leading = [len(text) - len(text.lstrip()) for text in texts]  # blanks before the text count for nothing
        while pending:
            cuts = [texts[i][:leading[i] + limit] for i in pending]
            retry = []
            for index, cut, tokens in zip(pending, cuts, self._encode_batch([head + cut for cut in cuts])):
                whole = len(cut) == len(texts[index])
                if whole or limit >= last or len(tokens) - head_tokens > keep + self.MARGIN // 2:
                    results[index], partial[index] = tokens, not whole
                else:
                    retry.append(index)
            pending, limit = retry, limit * 4
        return results, partial  # type: ignore[return-value]


def _special_ids(tokenizer: Tokenizer) -> frozenset[int]:
    """The special tokens that stand for no text ('[SEP]', '[PAD]'); the unknown token is left out: it stands for
    text the vocabulary lacks (an emoji, a word over the tokenizer's length limit), which is scored like any other."""
    unknown = tokenizer.token_to_id(getattr(tokenizer.model, "unk_token", None) or "")
    return frozenset(i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special and i != unknown)


def check_not_empty(name: str, ids: list[int], specials: frozenset[int]) -> None:
    """Text the tokenizer's normalisation reduces to nothing (combining marks alone, stripped characters) or to
    special tokens only ('[SEP]') carries nothing to score."""
    if all(token in specials for token in ids):
        raise EmptyTextError(name)


def query_budget_error(query_tokens: int, room: int) -> QueryTooLongError:
    return QueryTooLongError(
        f"the query takes {query_tokens} tokens with the template; max_model_len leaves {room}: shorten the query"
    )


class EncoderBase:
    """What every family's encoder shares: the tokenizer, its special ids, the long-document policy and its bounded
    use. A family's encoder adds `_doc_budget` and `encode`."""

    takes_instruction = False  # does the family's prompt have a place for INSTRUCTION?

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        self._tok = served_tokenizer(model)  # an instance of its own, built from the checkpoint's files
        self._specials_ids = _special_ids(self._tok)
        self._bounded = BoundedTokenizer(ids_of(self._tok))
        self._max_len = max_model_len
        self._long = long_documents or LongDocuments()  # default: cut

    def _doc_budget(self) -> int:
        """Tokens of one document that fit in one sequence (the query taken at its smallest)."""
        raise NotImplementedError

    def document_span(self, max_tokens_per_doc: int | None = None) -> int:
        return self._long.span(self._doc_budget(), max_tokens_per_doc)

    def _encode_query(self, query: str) -> list[int]:
        ids = self._tok.encode(query, add_special_tokens=False).ids
        check_not_empty("QUERY", ids, self._specials_ids)
        return ids

    def _documents(self, documents: list[str], budget: int, cap: int | None) -> list[tuple[list[list[int]], bool]]:
        """Each document's id list(s) to score and whether it was cut, split or read only in part."""
        tokens, partial = self._bounded.encode_batch(documents, self._long.span(budget, cap))
        fitted = []
        for index, (ids, shortened) in enumerate(zip(tokens, partial)):
            check_not_empty(f"DOCUMENTS[{index}]", ids, self._specials_ids)
            pieces, cut = self._long.fit(ids, budget, cap)
            fitted.append((pieces, cut or shortened))
        return fitted
