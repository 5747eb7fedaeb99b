"""One Triton request and its response, in the tensor contract (python_backends.contract): the tritonclient
module for a protocol, the InferInput list, the outputs to ask for, and the parsed answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from python_backends import contract


def protocol_module(protocol: str, asynchronous: bool = False) -> ModuleType:
    """`tritonclient.{grpc,http}` or, with `asynchronous`, `tritonclient.{grpc,http}.aio`."""
    if protocol == "grpc":
        if asynchronous:
            import tritonclient.grpc.aio as module
        else:
            import tritonclient.grpc as module
    elif protocol == "http":
        if asynchronous:
            import tritonclient.http.aio as module
        else:
            import tritonclient.http as module
    else:
        raise ValueError(f"protocol must be 'grpc' or 'http', got {protocol!r}")
    return module


def _bytes_row(values: Sequence[str | bytes]) -> np.ndarray:
    row = np.empty((1, len(values)), dtype=np.object_)
    for i, value in enumerate(values):
        row[0, i] = value if isinstance(value, bytes) else value.encode("utf-8")
    return row


def _int32(name: str, value: int) -> np.ndarray:
    """A [1, 1] INT32 tensor; a value INT32 cannot hold is refused here with the server's range words."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not -contract.INT32_MAX - 1 <= value <= contract.INT32_MAX:
        raise ValueError(f"{name} must fit INT32, got {value}")
    return np.array([[value]], dtype=np.int32)


def build_inputs(
    module: ModuleType,
    query: str | bytes,
    documents: Sequence[str | bytes],
    top_n: int | None = None,
    instruction: str | None = None,
    max_tokens_per_doc: int | None = None,
) -> list[Any]:
    """The InferInput list of one request for `tritonclient.grpc`, `tritonclient.http` or their `.aio`;
    optional inputs are sent only when given."""
    arrays: dict[str, np.ndarray] = {
        contract.QUERY: _bytes_row([query]),
        contract.DOCUMENTS: _bytes_row(documents),
    }
    if instruction is not None:
        arrays[contract.INSTRUCTION] = _bytes_row([instruction])
    if top_n is not None:
        arrays[contract.TOP_N] = _int32(contract.TOP_N, top_n)
    if max_tokens_per_doc is not None:
        arrays[contract.MAX_TOKENS_PER_DOC] = _int32(contract.MAX_TOKENS_PER_DOC, max_tokens_per_doc)
    inputs = []
    for name, array in arrays.items():
        tensor = module.InferInput(name, list(array.shape), contract.TENSORS[name].datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


# A single request keeps the server's RANKING; a split call ranks the merged raw scores itself.
SINGLE_REQUEST_OUTPUTS = (contract.SCORES, contract.RAW_SCORES, contract.RANKING, contract.TRUNCATED, contract.CALIBRATION)
SPLIT_REQUEST_OUTPUTS = (contract.SCORES, contract.RAW_SCORES, contract.TRUNCATED, contract.CALIBRATION)


def requested_outputs(module: ModuleType, split: bool) -> list[Any]:
    names = SPLIT_REQUEST_OUTPUTS if split else SINGLE_REQUEST_OUTPUTS
    return [module.InferRequestedOutput(name) for name in names]


@dataclass(frozen=True)
class ParsedResponse:
    """One Triton response, in the request's own document order; `ranking` is None when not asked for."""

    scores: np.ndarray
    raw_scores: np.ndarray
    ranking: np.ndarray | None
    truncated: int
    calibration: str


def parse_result(result: Any, split: bool = False) -> ParsedResponse:
    calibration = result.as_numpy(contract.CALIBRATION)[0, 0]
    return ParsedResponse(
        scores=result.as_numpy(contract.SCORES)[0],
        raw_scores=result.as_numpy(contract.RAW_SCORES)[0],
        ranking=None if split else result.as_numpy(contract.RANKING)[0],
        truncated=int(result.as_numpy(contract.TRUNCATED)[0, 0]),
        calibration=calibration.decode() if isinstance(calibration, bytes) else str(calibration),
    )
