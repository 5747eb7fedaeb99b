"""Cohere's document semantics: a document is a string or an object; `rank_fields` picks the object's fields that
are ranked (default: `text`), and the caller gets back the object it sent.

The work is linear in the body: each object costs the smaller of its own keys and the rank fields, so a body of
many objects and many rank fields (each of them bounded by the body's size) takes milliseconds, not minutes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import ApiError, ApiErrorKind

DEFAULT_RANK_FIELD = "text"
LISTED_FIELDS = 5  # rank fields named in an error; the rest are counted


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class RankFields:
    """The rank fields of one call, each once, in the caller's order."""

    def __init__(self, rank_fields: Sequence[str] | None) -> None:
        self.order = {f: i for i, f in enumerate(dict.fromkeys(rank_fields or [DEFAULT_RANK_FIELD]))}

    def present(self, document: Mapping[str, Any]) -> list[str]:
        if len(self.order) <= len(document):
            return [f for f in self.order if document.get(f) is not None]
        return sorted((k for k, v in document.items() if v is not None and k in self.order), key=self.order.__getitem__)

    def missing_error(self, index: int) -> ApiError:
        fields = list(self.order)
        where = f"documents[{index}].{fields[0]}" if len(fields) == 1 else f"documents[{index}]"
        listed = ", ".join(repr(f[:64]) for f in fields[:LISTED_FIELDS])
        more = f" and {len(fields) - LISTED_FIELDS} more" if len(fields) > LISTED_FIELDS else ""
        return ApiError(ApiErrorKind.INVALID, f"{where} is missing: a document object needs one of the rank fields "
                        f"[{listed}]{more}", param=where)

    def text(self, index: int, document: str | Mapping[str, Any]) -> str:
        """The text ranked for one document. Several rank fields are joined as `key: value` lines in rank_fields
        order (the YAML form Cohere recommends for structured data); a single field is ranked as its bare value."""
        if isinstance(document, str):
            return document
        present = self.present(document)
        if not present:
            raise self.missing_error(index)
        if len(present) == 1:
            return _value_text(document[present[0]])
        return "\n".join(f"{f}: {_value_text(document[f])}" for f in present)


def document_texts(documents: Sequence[str | Mapping[str, Any]], rank_fields: Sequence[str] | None) -> list[str]:
    fields = RankFields(rank_fields)
    return [fields.text(i, d) for i, d in enumerate(documents)]


def returned_document(document: str | Mapping[str, Any]) -> dict[str, Any]:
    """What a result carries back: the caller's object as sent, or {"text": ...} for a string."""
    return {"text": document} if isinstance(document, str) else dict(document)
