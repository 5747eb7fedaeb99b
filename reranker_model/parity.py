"""Each family's reference scorer, written from its model card's own recipe with transformers in fp32 and nothing of
the serving code (its prompts, its token boundaries, its truncation): what the served raw scores must equal.

    >>> reference = reference_for("/tmp/tiny-bert", max_length=128)      # doctest: +SKIP
    >>> reference.scores("capital of France", ["Paris is the capital.", "Bananas are yellow."])  # doctest: +SKIP
    array([ 0.03, -0.01], dtype=float32)

- cross-encoder (sentence-transformers' CrossEncoder): the pair tokenized together, truncated longest first, the
  classifier's one logit;
- Qwen3-Reranker (its model card): the system prefix, `<Instruct>: ... <Query>: ... <Document>: ...` truncated at
  the end, the assistant suffix, logit("yes") - logit("no") at the last position;
- bi-encoder (sentence-transformers with mean pooling): each text on its own, mean of its token states, normalised,
  the query's cosine with the document's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass
class Reference:
    """One family's recipe on one checkpoint; `scores` gives one raw score per document."""

    folder: str
    max_length: int  # tokens of one sequence, as the served variant's max_model_len
    device: str = "cpu"  # torch's: "cuda" scores a full-size checkpoint in fp32 in seconds
    family: ClassVar[str]

    def __post_init__(self) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.model = self._load().to(self.device).eval()

    def _load(self):
        raise NotImplementedError

    def scores(self, query: str, documents: list[str], instruction: str | None = None) -> np.ndarray:
        import torch

        with torch.no_grad():
            return np.asarray([self._score(query, document, instruction) for document in documents], dtype=np.float32)

    def _score(self, query: str, document: str, instruction: str | None) -> float:
        raise NotImplementedError


class CrossEncoderReference(Reference):
    family = "cross_encoder"

    def _load(self):
        import torch
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(self.folder, dtype=torch.float32)

    def _score(self, query: str, document: str, instruction: str | None) -> float:
        inputs = self.tokenizer(query, document, truncation="longest_first", max_length=self.max_length,
                                return_tensors="pt").to(self.device)
        return self.model(**inputs).logits[0, 0].item()


class Qwen3YesNoReference(Reference):
    family = "yes_no_reranker"
    # Qwen/Qwen3-Reranker-0.6B's model card, as written there
    PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
              "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
    SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

    def _load(self):
        import torch
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(self.folder, dtype=torch.float32)

    def _score(self, query: str, document: str, instruction: str | None) -> float:
        import torch

        prefix = self.tokenizer.encode(self.PREFIX, add_special_tokens=False)
        suffix = self.tokenizer.encode(self.SUFFIX, add_special_tokens=False)
        text = f"<Instruct>: {instruction or self.INSTRUCTION}\n<Query>: {query}\n<Document>: {document}"
        body = self.tokenizer(text, truncation="longest_first", return_attention_mask=False,
                              max_length=self.max_length - len(prefix) - len(suffix))["input_ids"]
        last = self.model(input_ids=torch.tensor([prefix + body + suffix], device=self.device)).logits[0, -1]
        yes, no = self.tokenizer.convert_tokens_to_ids("yes"), self.tokenizer.convert_tokens_to_ids("no")
        return (last[yes] - last[no]).item()


class BiEncoderReference(Reference):
    family = "bi_encoder"

    def _load(self):
        import torch
        from transformers import AutoModel

        return AutoModel.from_pretrained(self.folder, dtype=torch.float32)

    def _embed(self, text: str) -> np.ndarray:
        inputs = self.tokenizer(text, truncation=True, max_length=self.max_length, return_tensors="pt").to(self.device)
        mean = self.model(**inputs).last_hidden_state[0].mean(dim=0).cpu().numpy()
        return mean / np.linalg.norm(mean)

    def _score(self, query: str, document: str, instruction: str | None) -> float:
        return float(self._embed(query) @ self._embed(document))


REFERENCES: dict[str, type[Reference]] = {cls.family: cls for cls in (CrossEncoderReference, Qwen3YesNoReference,
                                                                       BiEncoderReference)}


def reference_for(folder: str, max_length: int, device: str = "cpu") -> Reference:
    """The reference scorer of the family the serving code detects for `folder`."""
    from python_backends.families import detect_model

    return REFERENCES[detect_model(folder).family.name](folder, max_length, device)
