"""Cross-encoders (BERT, XLM-R, ... *ForSequenceClassification with one label): the pair in one sequence,
`[CLS] query [SEP] document [SEP]` with token types from the tokenizer's own pair template; the score is the
classifier's logit."""

from __future__ import annotations

from ..preprocess.tokenization import EncodedRequest, EncoderBase, LongDocuments, flatten_documents, query_budget_error
from .base import Checkpoint, ClassifierLogit, ModelFamily, UnsupportedModelError


class CrossEncoderPairs(EncoderBase):
    """Each document paired with the query by the tokenizer's own pair template (`post_process`)."""

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        super().__init__(model, max_model_len, long_documents)
        self._specials = self._tok.num_special_tokens_to_add(is_pair=True)

    def _doc_budget(self) -> int:
        return self._max_len - self._specials - 1

    def encode(
        self, query: str, documents: list[str], instruction: str | None, max_tokens_per_doc: int | None = None
    ) -> EncodedRequest:
        query_enc = self._encode_query(query)
        budget = self._max_len - self._specials - len(query_enc.ids)
        if budget < 1:
            raise query_budget_error(len(query_enc.ids) + self._specials, self._max_len)
        pairs, owners, truncated = flatten_documents(
            [
                ([self._tok.post_process(query_enc, piece, add_special_tokens=True) for piece in pieces], cut)
                for pieces, cut in self._documents(documents, budget, max_tokens_per_doc)
            ]
        )
        return EncodedRequest([pair.ids for pair in pairs], owners, [pair.type_ids for pair in pairs], truncated)


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
