"""JSON text decoded with a message that says what is wrong and where in the text; the caller names the text
(a model parameter, a profile file, a line of a data file) in front of it."""

from __future__ import annotations

import json
from typing import Any


def decode_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None


def decode_json_object(text: str) -> dict[str, Any]:
    value = decode_json(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
