"""The tensors that cross preprocess -> engine: one request's sequences as flat token tensors (`SequenceBatch`).

The preprocess step builds a `SequenceBatch` and sends its `tensors()`; the engine step rebuilds it with
`from_arrays`, which checks it in full before vLLM sees it. Any client can call `rerank_engine` directly on the
server's ports, so the engine trusts nothing the preprocess step did: a malformed request is refused alone
(INVALID_ARG) and never reaches vLLM, where it would fail the requests batched with it. The checks run in a fixed
order, cheapest first; each names the tensor and the limit.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InvalidRequest

TENSORS = ("TOKEN_IDS", "TOKEN_TYPE_IDS", "SEQUENCE_LENGTHS", "SEQUENCE_DOCUMENTS")
QUERY_ROW = -1  # SEQUENCE_DOCUMENTS value of a bi-encoder's query sequence


@dataclass(frozen=True)
class EngineLimits:
    """What the running engine can take; read from vLLM's own model config, not copied."""

    max_model_len: int
    vocab_size: int
    max_sequences: int
    query_row: bool  # the score needs the query as its own first sequence (bi-encoder)


@dataclass(frozen=True)
class SequenceBatch:
    """One request's sequences: token ids and types cut at `lengths`; `documents[i]` owns sequence i."""

    token_ids: np.ndarray
    token_type_ids: np.ndarray
    lengths: np.ndarray
    documents: np.ndarray

    @property
    def tokens(self) -> int:
        return int(self.token_ids.shape[0])

    @property
    def document_count(self) -> int:
        return int(self.documents.max()) + 1

    @classmethod
    def from_sequences(cls, token_ids: list[list[int]], token_type_ids: list[list[int]] | None,
                       documents: Sequence[int]) -> "SequenceBatch":
        """One request's sequences, as lists, flattened into the tensors that cross to the engine (no token types:
        all zeros); `documents[i]` owns sequence i."""
        flat_ids = _flat(token_ids)
        return cls(
            token_ids=flat_ids,
            token_type_ids=np.zeros_like(flat_ids) if token_type_ids is None else _flat(token_type_ids),
            lengths=np.asarray([len(ids) for ids in token_ids], dtype=np.int32),
            documents=np.asarray(documents, dtype=np.int32),
        )

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], limits: EngineLimits) -> "SequenceBatch":
        """Validate the four input tensors of one Triton request (each [1, n]) against `limits`."""
        flat = {name: _one_row(name, arrays[name]) for name in TENSORS}
        batch = cls(flat["TOKEN_IDS"], flat["TOKEN_TYPE_IDS"], flat["SEQUENCE_LENGTHS"], flat["SEQUENCE_DOCUMENTS"])
        batch._check_lengths(limits)
        batch._check_tokens(limits)
        batch._check_documents(limits)
        return batch

    def _check_lengths(self, limits: EngineLimits) -> None:
        count = self.lengths.shape[0]
        if count == 0 or count > limits.max_sequences:
            raise InvalidRequest(f"SEQUENCE_LENGTHS: {count} sequences, expected 1..{limits.max_sequences}", "SEQUENCE_LENGTHS")
        if self.documents.shape[0] != count:
            raise InvalidRequest(f"SEQUENCE_DOCUMENTS has {self.documents.shape[0]} entries for {count} sequences",
                                 "SEQUENCE_DOCUMENTS")
        shortest, longest = int(self.lengths.min()), int(self.lengths.max())
        if shortest < 1 or longest > limits.max_model_len:
            raise InvalidRequest(
                f"SEQUENCE_LENGTHS: every sequence must hold 1..{limits.max_model_len} tokens (max_model_len), "
                f"got {shortest}..{longest}"
            )
        total = int(self.lengths.astype(np.int64).sum())
        if total != self.tokens or self.token_type_ids.shape[0] != self.tokens:
            raise InvalidRequest(
                f"TOKEN_IDS ({self.tokens}), TOKEN_TYPE_IDS ({self.token_type_ids.shape[0]}) and the sum of "
                f"SEQUENCE_LENGTHS ({total}) disagree"
            )

    def _check_tokens(self, limits: EngineLimits) -> None:
        low, high = int(self.token_ids.min()), int(self.token_ids.max())
        if low < 0 or high >= limits.vocab_size:
            raise InvalidRequest(f"TOKEN_IDS: ids must be in 0..{limits.vocab_size - 1} (vocabulary), got {low}..{high}",
                                 "TOKEN_IDS")
        if not np.isin(self.token_type_ids, (0, 1)).all():
            raise InvalidRequest("TOKEN_TYPE_IDS: values must be 0 or 1", "TOKEN_TYPE_IDS")
        # Types may only fall from 1 back to 0 where a new sequence starts: segment A (0) precedes B (1).
        falls = np.flatnonzero(np.diff(self.token_type_ids) < 0) + 1
        if not np.isin(falls, np.cumsum(self.lengths)[:-1]).all():
            raise InvalidRequest("TOKEN_TYPE_IDS: within a sequence, segment A (0) must precede segment B (1)",
                                 "TOKEN_TYPE_IDS")

    def _check_documents(self, limits: EngineLimits) -> None:
        owners = self.documents
        queries = np.flatnonzero(owners == QUERY_ROW)
        expected_queries = [0] if limits.query_row else []
        if queries.tolist() != expected_queries:
            where = "exactly one, the first sequence" if limits.query_row else "none"
            raise InvalidRequest(f"SEQUENCE_DOCUMENTS: query rows (-1) must be {where} for this model", "SEQUENCE_DOCUMENTS")
        docs = owners[owners != QUERY_ROW]
        if docs.size == 0 or int(docs.min()) < 0:
            raise InvalidRequest("SEQUENCE_DOCUMENTS: document indices must be >= 0 and at least one is needed",
                                 "SEQUENCE_DOCUMENTS")
        # Every index 0..D-1 owns a sequence, so D <= the number of sequences: a few bytes cannot ask for
        # millions of documents.
        if np.unique(docs).shape[0] != int(docs.max()) + 1:
            raise InvalidRequest("SEQUENCE_DOCUMENTS: document indices must cover 0..D-1 without gaps", "SEQUENCE_DOCUMENTS")

    def tensors(self) -> dict[str, np.ndarray]:
        """The four tensors of one Triton request, each [1, n], by their names in TENSORS."""
        arrays = (self.token_ids, self.token_type_ids, self.lengths, self.documents)
        return {name: array[None, :] for name, array in zip(TENSORS, arrays)}

    def windows(self, tokens: int) -> list[range]:
        """The sequences in consecutive runs of at most `tokens` tokens each (a longer sequence makes a run alone)."""
        runs, start, total = [], 0, 0
        for n, length in enumerate(self.lengths.tolist()):
            if n > start and total + length > tokens:
                runs.append(range(start, n))
                start, total = n, 0
            total += length
        runs.append(range(start, len(self.lengths)))
        return runs

    def split(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        cuts = np.cumsum(self.lengths)[:-1]
        return np.split(self.token_ids, cuts), np.split(self.token_type_ids, cuts)

    def document_scores(self, sequence_scores: np.ndarray) -> np.ndarray:
        """One score per document: the best of its sequences (windows); query rows carry no score."""
        owners = self.documents[self.documents != QUERY_ROW]
        best = np.full(self.document_count, -np.inf, dtype=np.float32)
        np.maximum.at(best, owners, sequence_scores.astype(np.float32))
        return best


def _flat(sequences: list[list[int]]) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int32, count=sum(map(len, sequences)))


def _one_row(name: str, array: np.ndarray) -> np.ndarray:
    if array.ndim != 2 or array.shape[0] != 1:
        raise InvalidRequest(f"{name}: expected shape [1, n], got {list(array.shape)}", name)
    return array[0]
