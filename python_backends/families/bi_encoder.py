"""Bi-encoders (sentence-embedding models): the query and each document embedded alone; the score is the cosine of
each document's embedding with the query's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..encoding.tokenization import EncodedRequest, EncoderBase, LongDocuments, flatten_documents, query_budget_error
from .base import Checkpoint, ModelFamily, ScoreKind, UnsupportedModelError


@dataclass(frozen=True)
class SingleTemplate:
    """The tokenizer's single-text template as ids around the text, `head` text `tail` (`[CLS] text [SEP]`), read once
    from its own `post_process`, as a cross-encoder's pair template is (PairTemplate): laid out by list concatenation,
    not by a merged Encoding for each document."""

    head: list[int]
    tail: list[int]

    PROBES = ("a", "a text of a few words")  # the second checks the first's reading

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> "SingleTemplate":
        probe, check = (tokenizer.encode(text, add_special_tokens=False) for text in cls.PROBES)
        laid_out = tokenizer.post_process(probe, add_special_tokens=True)
        at = laid_out.special_tokens_mask.index(0)
        template = cls(laid_out.ids[:at], laid_out.ids[at + len(probe.ids):])
        expected = tokenizer.post_process(check, add_special_tokens=True)
        if template.ids(check.ids) != expected.ids:
            raise UnsupportedModelError(
                f"the tokenizer's single-text template is not 'specials, text, specials': {' '.join(expected.tokens)}"
            )
        return template

    def ids(self, text: list[int]) -> list[int]:
        return self.head + text + self.tail


class BiEncoderTexts(EncoderBase):
    """The query once, then each document, each with the model's single-sequence specials."""

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        super().__init__(model, max_model_len, long_documents)
        self._template = SingleTemplate.of(self._tok)

    def _doc_budget(self) -> int:
        return self._max_len - len(self._template.head) - len(self._template.tail)

    def encode(
        self, query: str, documents: list[str], instruction: str | None, max_tokens_per_doc: int | None = None
    ) -> EncodedRequest:
        budget = self._doc_budget()
        query_ids = self._encode_query(query)
        if len(query_ids) > budget:
            raise query_budget_error(len(query_ids), budget)
        texts, owners, truncated = flatten_documents(self._documents(documents, budget, max_tokens_per_doc))
        sequences = [self._template.ids(ids) for ids in (query_ids, *texts)]
        return EncodedRequest(sequences, [-1, *owners], None, truncated)


def cosine_to_first(embeddings: np.ndarray) -> np.ndarray:
    """Cosine of the query (row 0) with every document row."""
    norms = np.linalg.norm(embeddings, axis=1)
    norms[norms == 0] = 1.0
    unit = embeddings / norms[:, None]
    return (unit[1:] @ unit[0]).astype(np.float32)


class CosineToQuery(ScoreKind):
    """Each sequence embedded alone; the score is the cosine of each document with the query."""

    task = "embed"
    query_row = True

    def params(self, types: np.ndarray) -> Any:
        return self._params(task=self.task)  # the model's own normalisation; cosine is scale-free anyway

    def sequence_scores(self, pooled: np.ndarray) -> np.ndarray:
        return cosine_to_first(pooled)


class BiEncoder(ModelFamily):
    name = "bi_encoder"
    score_type = "cosine"
    raw_range = "[-1, 1], cosine of query and document embeddings; higher = more relevant"
    unfitted_method = "identity"
    unfitted_why = "a cosine is not a probability: it is served as it is until a profile is fitted"
    encoder = BiEncoderTexts
    score_kind = CosineToQuery

    @classmethod
    def detects(cls, checkpoint: Checkpoint) -> bool:
        if not checkpoint.is_encoder or checkpoint.is_sentence_transformer:
            return checkpoint.is_encoder
        if checkpoint.architecture.endswith("Model"):  # which pooling, and is it a cross-encoder without its head?
            raise UnsupportedModelError(
                f"{checkpoint.path}: {checkpoint.architecture} is an encoder without a head and without "
                "sentence-transformers' modules.json: a bi-encoder saved by sentence-transformers (its Pooling "
                "module in modules.json) is served as one; a cross-encoder needs its one-logit classification head "
                "(save it with AutoModelForSequenceClassification)")
        return False
