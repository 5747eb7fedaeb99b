"""Request tensors as the Python-backend steps receive them."""

from __future__ import annotations

import numpy as np


def text_row(*values: str) -> np.ndarray:
    """A [1, n] BYTES tensor of UTF-8 strings (QUERY, DOCUMENTS, INSTRUCTION): numpy object array of bytes."""
    return np.array([[value.encode() for value in values]], dtype=object)
