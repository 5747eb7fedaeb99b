"""Prompt templates of instruction-following rerankers, as their model cards define them.

Only the Qwen3-Reranker family needs one; cross-encoders use their tokenizer's own pair encoding.
The template is split into a fixed prefix, the query block and a fixed suffix so that truncation can
cut the document alone and keep the suffix (where the yes/no answer is read) intact.
"""

from __future__ import annotations

from dataclasses import dataclass

QWEN3_DEFAULT_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"

QWEN3_PREFIX = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
    'Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n<|im_start|>user\n'
)
QWEN3_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


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
