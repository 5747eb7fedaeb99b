"""Turn a :class:`loadtest.corpus.LoadRequest` into what Triton's clients send, following
docs/CONTRACT.md (the `reranker` ensemble):

    QUERY        BYTES  [1, 1]   required
    DOCUMENTS    BYTES  [1, N]   required, N >= 1
    INSTRUCTION  BYTES  [1, 1]   optional
    TOP_N        INT32  [1, 1]   optional (default N)
  ->
    SCORES FP32 [1, N], RAW_SCORES FP32 [1, N], RANKING INT32 [1, min(TOP_N, N)],
    TRUNCATED INT32 [1, 1], CALIBRATION BYTES [1, 1]

Three encodings: KServe v2 JSON (HTTP ``/v2/models/<model>/infer``), tritonclient gRPC
``InferInput`` objects, and perf_analyzer's ``--input-data`` JSON. The HTTP and perf_analyzer
forms need only the standard library (the official locust image has no numpy/tritonclient).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from python_backends import contract  # stdlib only: the locust image imports it too

MODEL_NAME = contract.MODEL_NAME

# (name, datatype, required) and (name, datatype): the tensor contract, from python_backends.contract
CONTRACT_INPUTS: tuple[tuple[str, str, bool], ...] = tuple((t.name, t.datatype, t.required) for t in contract.INPUTS)
CONTRACT_OUTPUTS: tuple[tuple[str, str], ...] = tuple((t.name, t.datatype) for t in contract.OUTPUTS)
# what the load generators ask for (RAW_SCORES as well, so a run also checks the raw scores arrive)
REQUESTED_OUTPUTS: tuple[str, ...] = (contract.SCORES, contract.RAW_SCORES, contract.RANKING, contract.TRUNCATED)


def _tensors(req) -> list[tuple[str, str, list[int], list[Any]]]:
    """(name, datatype, shape with the batch dimension, flat values) for one request."""
    docs = list(req.documents)
    values: dict[str, list[Any]] = {contract.QUERY: [req.query], contract.DOCUMENTS: docs}
    if req.instruction is not None:
        values[contract.INSTRUCTION] = [req.instruction]
    if req.top_n is not None:
        values[contract.TOP_N] = [int(req.top_n)]
    tensors = contract.TENSORS
    return [(n, tensors[n].datatype, tensors[n].shape(len(docs)), v) for n, v in values.items()]


def kserve_json(req, outputs: Sequence[str] = REQUESTED_OUTPUTS) -> dict:
    """Body of a KServe v2 ``POST /v2/models/reranker/infer`` request."""
    body: dict[str, Any] = {
        "inputs": [
            {"name": n, "shape": s, "datatype": dt, "data": v} for n, dt, s, v in _tensors(req)
        ]
    }
    if outputs:
        body["outputs"] = [{"name": o} for o in outputs]
    return body


def grpc_inputs(req, client_module, outputs: Sequence[str] = REQUESTED_OUTPUTS):
    """``(inputs, outputs)`` for ``client.infer``; ``client_module`` is ``tritonclient.grpc``
    (its ``InferInput`` / ``InferRequestedOutput`` are also what ``tritonclient.grpc.aio`` uses)."""
    import numpy as np

    inputs = []
    for name, dt, shape, values in _tensors(req):
        if dt == "BYTES":
            arr = np.array([v.encode("utf-8") for v in values], dtype=np.object_).reshape(shape)
        else:
            arr = np.array(values, dtype=np.int32).reshape(shape)
        inp = client_module.InferInput(name, shape, dt)
        inp.set_data_from_numpy(arr)
        inputs.append(inp)
    requested = [client_module.InferRequestedOutput(o) for o in outputs]
    return inputs, requested


def perf_analyzer_entry(req) -> dict:
    """One element of perf_analyzer's ``{"data": [...]}``. Shapes leave out the batch
    dimension: perf_analyzer adds it (``-b 1``) for a model with ``max_batch_size > 0``."""
    return {name: {"content": values, "shape": shape[1:]} for name, _, shape, values in _tensors(req)}


def perf_analyzer_input_data(reqs: Iterable) -> dict:
    return {"data": [perf_analyzer_entry(r) for r in reqs]}


class BadResponse(ValueError):
    """A response that does not follow the contract."""


def check_result(n_docs: int, top_n: int | None, scores: Sequence[float], ranking: Sequence[int]) -> None:
    """Raise :class:`BadResponse` unless SCORES / RANKING (flattened) fit the contract."""
    scores = list(scores)
    ranking = [int(i) for i in ranking]
    if len(scores) != n_docs:
        raise BadResponse(f"SCORES has {len(scores)} values, expected {n_docs}")
    want = n_docs if top_n is None else min(top_n, n_docs)
    if len(ranking) != want:
        raise BadResponse(f"RANKING has {len(ranking)} values, expected {want}")
    if len(set(ranking)) != len(ranking) or any(not 0 <= i < n_docs for i in ranking):
        raise BadResponse(f"RANKING {ranking} is not distinct indices in [0, {n_docs})")
    if any(not (0.0 <= s <= 1.0) for s in scores):
        raise BadResponse("SCORES outside 0..1 (calibrated probabilities expected)")
    best = [scores[i] for i in ranking]
    if any(a < b for a, b in zip(best, best[1:])):
        raise BadResponse("RANKING is not in descending SCORES order")


def kserve_outputs(body: dict) -> dict[str, list]:
    """``{name: flat data}`` from a KServe v2 JSON response."""
    return {o["name"]: o.get("data", []) for o in body.get("outputs", [])}
