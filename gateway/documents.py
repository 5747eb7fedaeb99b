"""Cohere's document semantics: a document is a string or an object; `rank_fields` picks the object's fields that
are ranked (default: `text`), and the caller gets back the object it sent."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ApiError

DEFAULT_RANK_FIELD = "text"


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def document_text(index: int, document: str | Mapping[str, Any], rank_fields: Sequence[str] | None) -> str:
    """The text ranked for one document. Several rank fields are joined as `key: value` lines in rank_fields
    order (the YAML form Cohere recommends for structured data); a single field is ranked as its bare value."""
    if isinstance(document, str):
        return document
    fields = list(rank_fields) if rank_fields else [DEFAULT_RANK_FIELD]
    present = [f for f in fields if f in document and document[f] is not None]
    if not present:
        where = f"documents[{index}].{fields[0]}" if len(fields) == 1 else f"documents[{index}]"
        raise ApiError("invalid", f"{where} is missing: a document object needs one of the rank fields {fields}",
                       param=where)
    if len(present) == 1:
        return _value_text(document[present[0]])
    return "\n".join(f"{f}: {_value_text(document[f])}" for f in present)


def document_texts(documents: Sequence[str | Mapping[str, Any]], rank_fields: Sequence[str] | None) -> list[str]:
    return [document_text(i, d, rank_fields) for i, d in enumerate(documents)]


def returned_document(document: str | Mapping[str, Any]) -> dict[str, Any]:
    """What a result carries back: the caller's object as sent, or {"text": ...} for a string."""
    return {"text": document} if isinstance(document, str) else dict(document)
