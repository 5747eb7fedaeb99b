"""Qwen3-Reranker: a causal LM trained to answer "yes" or "no" to a chat prompt, which vLLM loads as a one-logit
classifier (logit_yes - logit_no) through `hf_overrides`; relevance = sigmoid of that logit.

The prompt is the model card's. It is split into a fixed prefix, the query block and a fixed suffix so that
truncation can cut the document alone and keep the suffix (where the yes/no answer is read) intact.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..encoding.fast_bpe import fast_bpe
from ..encoding.tokenization import (
    BoundedTokenizer,
    EncodedRequest,
    EncoderBase,
    LongDocuments,
    flatten_documents,
    check_not_empty,
    query_budget_error,
)
from .base import Checkpoint, ClassifierLogit, ModelFamily, UnsupportedModelError

QWEN3_DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

# How vLLM turns the causal LM into a one-logit classifier: logit_yes - logit_no.
HF_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}


@dataclass(frozen=True)
class YesNoPrompt:
    """The pieces of one request's prompts: `head` is shared by all its documents."""

    head: str
    suffix: str

    def render(self, document: str) -> str:
        return f"{self.head}{document}{self.suffix}"


def qwen3_reranker_prompt(query: str, instruction: str | None = None) -> YesNoPrompt:
    """The exact Qwen3-Reranker prompt around a document, default instruction when none is given."""
    instruct = instruction if instruction else QWEN3_DEFAULT_INSTRUCTION
    head = f"{QWEN3_PREFIX}<Instruct>: {instruct}\n<Query>: {query}\n<Document>: "
    return YesNoPrompt(head=head, suffix=QWEN3_SUFFIX)


class Qwen3YesNoPrompts(EncoderBase):
    """The chat prompt, tokenized as the model card does (prefix, body, suffix apart). The bodies, nearly all of the
    tokenizing, go through the tokenizer's exact tiktoken twin where it has one (python_backends.encoding.fast_bpe):
    they are read as ids alone."""

    takes_instruction = True

    def __init__(self, model: str, max_model_len: int, long_documents: LongDocuments | None = None) -> None:
        super().__init__(model, max_model_len, long_documents)
        twin = fast_bpe(self._tok)
        if twin:
            self._bounded = BoundedTokenizer(twin.encode_batch)
        self._prefix = self._tok.encode(QWEN3_PREFIX, add_special_tokens=False).ids
        self._suffix = self._tok.encode(QWEN3_SUFFIX, add_special_tokens=False).ids

    def _doc_budget(self) -> int:
        return self._max_len - len(self._prefix) - len(self._suffix)

    def encode(
        self, query: str, documents: list[str], instruction: str | None, max_tokens_per_doc: int | None = None
    ) -> EncodedRequest:
        self._encode_query(query)
        body_head = qwen3_reranker_prompt(query, instruction).head[len(QWEN3_PREFIX):]
        head_ids = self._tok.encode(body_head, add_special_tokens=False).ids
        budget = self._doc_budget()
        if budget - len(head_ids) < 1:
            raise query_budget_error(len(head_ids) + len(self._prefix) + len(self._suffix), self._max_len)
        # The body is tokenized whole, as the model card does; a document's own tokens may then start one token
        # early (its first word takes the head's closing space), so it is read for one token more than the head
        # alone leaves.
        span = self._long.span(budget - len(head_ids) + 1, max_tokens_per_doc)
        bodies, partial = self._bounded.encode_batch(documents, span, head=body_head, head_tokens=len(head_ids) - 1)
        prompts = []
        for index, (body_ids, shortened) in enumerate(zip(bodies, partial)):
            head_length = shared_prefix(body_ids, head_ids)
            head, document = body_ids[:head_length], body_ids[head_length:]
            check_not_empty(f"DOCUMENTS[{index}]", document, self._specials_ids)
            # Only the document is cut or windowed: the head stays whole in every sequence.
            pieces, cut = self._long.fit(document, budget - head_length, max_tokens_per_doc)
            prompts.append(([self._prefix + head + piece + self._suffix for piece in pieces], cut or shortened))
        ids, owners, truncated = flatten_documents(prompts)
        return EncodedRequest(ids, owners, None, truncated)


def shared_prefix(body_ids: list[int], head_ids: list[int]) -> int:
    """How many of a body's first tokens are the head's own: the document starts at the first token that differs.
    Byte-level BPE joins the head's closing space to a document starting with a letter, a mark or an emoji (" Paris"),
    so that body shares all but the head's last token; a digit or a special token leaves the space its own token."""
    length = len(head_ids)
    if body_ids[:length] == head_ids:
        return length
    if body_ids[:length - 1] == head_ids[:-1]:  # the joined space, as with most documents: compared in C, not a loop
        return length - 1
    return next(i for i, (ours, theirs) in enumerate(zip(body_ids, head_ids)) if ours != theirs)


class Qwen3YesNo(ModelFamily):
    name = "yes_no_reranker"
    score_type = "yes_no_logit"
    raw_range = "(-inf, +inf), logit_yes - logit_no; higher = more relevant"
    unfitted_method = "sigmoid"
    unfitted_why = "sigmoid(logit_yes - logit_no) is the model's own P(yes), as a yes/no reranker's card computes it"
    encoder = Qwen3YesNoPrompts
    score_kind = ClassifierLogit
    engine_args = {"runner": "pooling", "hf_overrides": HF_OVERRIDES}
    ARCHITECTURES = frozenset({"Qwen3ForCausalLM"})  # causal LMs trained as yes/no rerankers
    # Qwen3-Reranker's model card says so; a Qwen3 chat or base model has the same architecture and vocabulary.
    PIPELINE_TAG = "text-ranking"

    @classmethod
    def detects(cls, checkpoint: Checkpoint) -> bool:
        if checkpoint.architecture not in cls.ARCHITECTURES:
            return False
        tag = checkpoint.card_metadata().get("pipeline_tag")
        if tag != cls.PIPELINE_TAG:
            raise UnsupportedModelError(
                f"{checkpoint.path}: {checkpoint.architecture} is served as a yes/no reranker only when its model card "
                f"says so (README.md front matter 'pipeline_tag: {cls.PIPELINE_TAG}', as Qwen3-Reranker's does); this "
                f"one {'has none' if tag is None else f'says {tag!r}'}. A fine-tuned Qwen3-Reranker saved without its card: "
                f"add that front matter"
            )
        vocabulary = checkpoint.tokenizer()
        missing = [token for token in HF_OVERRIDES["classifier_from_token"] if vocabulary.token_to_id(token) is None]
        if missing:
            raise UnsupportedModelError(
                f"{checkpoint.path}: its tokenizer has no {missing} token, the answers a yes/no reranker is scored by"
            )
        return True
