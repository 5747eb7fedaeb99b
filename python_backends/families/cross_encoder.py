"""Cross-encoders (BERT, XLM-R, ... *ForSequenceClassification with one label): the pair in one sequence,
`[CLS] query [SEP] document [SEP]` with token types from the tokenizer's own pair template; the score is the
classifier's logit."""

from __future__ import annotations

from dataclasses import dataclass

from tokenizers import Tokenizer

from ..encoding.tokenization import EncodedRequest, EncoderBase, LongDocuments, flatten_documents, query_budget_error
from .base import Checkpoint, ClassifierLogit, ModelFamily, UnsupportedModelError


@dataclass(frozen=True)
class PairTemplate:
    """The tokenizer's pair template as ids around the two texts, `head` query `middle` document `tail`, and each
    part's token type. Read once from the tokenizer's own `post_process`: laying a pair out by list concatenation
    costs microseconds, where `post_process` builds a merged Encoding (offsets, masks) for each of a request's pairs
    (a tenth of the XLM-R shape's preprocess time on 2 CPU cores)."""

    head: list[int]
    middle: list[int]
    tail: list[int]
    types: tuple[int, int, int, int, int]  # of head, query, middle, document, tail

    PROBES = (("a", "b"), ("what is a query", "a document of a few words"))  # the second checks the first's reading

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> "PairTemplate":
        (query, document), check = (cls._probe(tokenizer, *texts) for texts in cls.PROBES)
        template = cls._read(query.ids, document.ids, tokenizer.post_process(query, document, add_special_tokens=True))
        expected = tokenizer.post_process(*check, add_special_tokens=True)
        if template.pair(check[0].ids, check[1].ids) != (expected.ids, expected.type_ids):
            layout = " ".join(expected.tokens)
            raise UnsupportedModelError(
                f"the tokenizer's pair template is not 'specials, query, specials, document, specials': {layout}"
            )
        return template

    @staticmethod
    def _probe(tokenizer: Tokenizer, query: str, document: str) -> tuple:
        return tokenizer.encode(query, add_special_tokens=False), tokenizer.encode(document, add_special_tokens=False)

    @classmethod
    def _read(cls, query: list[int], document: list[int], pair) -> "PairTemplate":
        own = pair.special_tokens_mask  # 1: the template's own token
        query_at = own.index(0)
        query_end = query_at + len(query)
        document_at = own.index(0, query_end)
        document_end = document_at + len(document)
        types = [*pair.type_ids, 0]  # a part of no tokens takes the type of whatever follows: none is read
        return cls(pair.ids[:query_at], pair.ids[query_end:document_at], pair.ids[document_end:],
                   (types[0], types[query_at], types[query_end], types[document_at], types[document_end]))

    @property
    def specials(self) -> int:
        """Tokens the template adds to a pair."""
        return len(self.head) + len(self.middle) + len(self.tail)

    def pair(self, query: list[int], document: list[int]) -> tuple[list[int], list[int]]:
        """The pair's ids and token types."""
        parts = (self.head, query, self.middle, document, self.tail)
        types: list[int] = []
        for part, kind in zip(parts, self.types):
            types += [kind] * len(part)
        return self.head + query + self.middle + document + self.tail, types


class CrossEncoderPairs(EncoderBase):
    """Each document paired with the query by the tokenizer's own pair template (`PairTemplate`)."""

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        super().__init__(model, max_model_len, long_documents)
        self._template = PairTemplate.of(self._tok)
        self._specials = self._template.specials

    def _doc_budget(self) -> int:
        return self._max_len - self._specials - 1

    def encode(
        self, query: str, documents: list[str], instruction: str | None, max_tokens_per_doc: int | None = None
    ) -> EncodedRequest:
        query_enc = self._encode_query(query)
        budget = self._max_len - self._specials - len(query_enc.ids)
        if budget < 1:
            raise query_budget_error(len(query_enc.ids) + self._specials, self._max_len)
        query_ids = query_enc.ids
        pairs, owners, truncated = flatten_documents(
            [
                ([self._template.pair(query_ids, piece.ids) for piece in pieces], cut)
                for pieces, cut in self._documents(documents, budget, max_tokens_per_doc)
            ]
        )
        return EncodedRequest([ids for ids, _ in pairs], owners, [types for _, types in pairs], truncated)


class CrossEncoder(ModelFamily):
    name = "cross_encoder"
    score_type = "logit"
    raw_range = "(-inf, +inf), the classifier's logit; higher = more relevant"
    unfitted_method = "sigmoid"
    unfitted_why = "sigmoid(logit) is what sentence-transformers' CrossEncoder and TEI return for a cross-encoder"
    encoder = CrossEncoderPairs
    score_kind = ClassifierLogit

    @classmethod
    def detects(cls, checkpoint: Checkpoint) -> bool:
        if not (checkpoint.architecture.endswith("ForSequenceClassification") and checkpoint.is_encoder):
            return False
        if checkpoint.num_labels != 1:
            raise UnsupportedModelError(
                f"{checkpoint.path}: {checkpoint.architecture} has num_labels={checkpoint.num_labels}; "
                "a cross-encoder reranker has exactly 1"
            )
        return True
