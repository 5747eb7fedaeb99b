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
        texts = [text.ids for text in check]
        if (template.ids(*texts), template.token_types(*map(len, texts))) != (expected.ids, expected.type_ids):
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

    def ids(self, query: list[int], document: list[int]) -> list[int]:
        """The pair's ids."""
        return self.head + query + self.middle + document + self.tail

    @property
    def typed(self) -> bool:
        """Does any part have a type other than 0? XLM-R's template does not: its pairs need no types (the engine's
        zeros stand), which spares a request a list per pair and their flattening."""
        return any(self.types)

    def token_types(self, query: int, document: int) -> list[int]:
        """The token types of a pair of `query` and `document` tokens."""
        types: list[int] = []
        for kind, length in zip(self.types, (len(self.head), query, len(self.middle), document, len(self.tail))):
            types += [kind] * length
        return types


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
        query_ids = self._encode_query(query)
        budget = self._max_len - self._specials - len(query_ids)
        if budget < 1:
            raise query_budget_error(len(query_ids) + self._specials, self._max_len)
        documents_ids, owners, truncated = flatten_documents(self._documents(documents, budget, max_tokens_per_doc))
        ids = [self._template.ids(query_ids, document) for document in documents_ids]
        types = [self._template.token_types(len(query_ids), len(document)) for document in documents_ids] \
            if self._template.typed else None
        return EncodedRequest(ids, owners, types, truncated)


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
