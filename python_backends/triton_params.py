"""Read `parameters { key: ... value: { string_value: ... } }` from a Triton model config.

config.pbtxt is the source of truth: a parameter the code needs and the config lacks is an error
at load time, never a silent default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .json_text import decode_json_object


class ConfigError(ValueError):
    """A model's config.pbtxt is missing a parameter or holds a bad value."""


class ModelParameters:
    """Typed access to the string parameters of one model's config."""

    def __init__(self, model_name: str, values: Mapping[str, str]) -> None:
        self.model_name = model_name
        self._values = dict(values)

    @classmethod
    def from_model_config(cls, model_config: Mapping[str, Any] | str) -> "ModelParameters":
        """Build from the dict (or JSON string) Triton passes to `initialize` as `model_config`."""
        config = json.loads(model_config) if isinstance(model_config, str) else model_config
        raw = config.get("parameters", {}) or {}
        values = {key: entry.get("string_value", "") for key, entry in raw.items()}
        return cls(str(config.get("name", "?")), values)

    def values(self) -> dict[str, str]:
        """Every parameter, as written."""
        return dict(self._values)

    def _raw(self, key: str) -> str:
        if key not in self._values:
            raise ConfigError(f"model '{self.model_name}': config.pbtxt has no parameter '{key}'")
        return self._values[key].strip()

    def text(self, key: str) -> str:
        value = self._raw(key)
        if not value:
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' is empty")
        return value

    def integer(self, key: str, minimum: int | None = None) -> int:
        value = self._raw(key)
        try:
            number = int(value)
        except ValueError:
            raise ConfigError(
                f"model '{self.model_name}': parameter '{key}' must be an integer, got '{value}'"
            ) from None
        if minimum is not None and number < minimum:
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' must be >= {minimum}, got {number}")
        return number

    def number(self, key: str, low: float, high: float) -> float:
        value = self._raw(key)
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' must be a number, got '{value}'") from None
        if not low <= number <= high:
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' must be in [{low}, {high}], got {number}")
        return number

    def boolean(self, key: str) -> bool:
        value = self._raw(key).lower()
        if value not in ("true", "false"):
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' must be true or false, got '{value}'")
        return value == "true"

    def json_object(self, key: str) -> dict[str, Any]:
        """A JSON object parameter; empty means {}."""
        value = self._raw(key)
        if not value:
            return {}
        try:
            return decode_json_object(value)
        except ValueError as problem:
            raise ConfigError(f"model '{self.model_name}': parameter '{key}' is {problem}") from None
