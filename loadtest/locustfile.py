"""Locust users for the `reranker` Triton ensemble (reference load shape: 1 query + 64 docs of ~500
tokens, top_n=10; see loadtest/corpus.py).

Two users, pick one by class name or by tag:

    locust -f loadtest/locustfile.py --headless TritonGrpcUser ...     # by user class
    locust -f loadtest/locustfile.py --headless --tags http ...        # by tag (http | grpc)

* ``TritonHttpUser`` -- KServe v2 JSON ``POST /v2/models/<model>/infer`` through locust's
  HttpUser (``--host http://localhost:8000``). Needs nothing beyond locust itself.
* ``TritonGrpcUser`` -- ``tritonclient.grpc`` (``TRITON_GRPC_URL``, default ``localhost:8001``);
  each call is timed here and reported with ``environment.events.request.fire``.
  Needs ``tritonclient[grpc]`` installed beside locust.

Environment knobs: ``RERANK_MODEL`` (default ``reranker``), ``TRITON_GRPC_URL``,
``LOAD_N_DOCS`` (64), ``LOAD_DOC_TOKENS`` (500), ``LOAD_QUERY_TOKENS`` (20), ``LOAD_TOP_N`` (10),
``LOAD_DISTINCT_REQUESTS`` (16 distinct requests cycled, so a prefix cache is not hit every time),
``LOAD_SEED`` (0), ``LOAD_CHECK`` (1: check each response against the contract).
"""

from __future__ import annotations

import atexit
import itertools
import json
import logging
import os
import sys
import time
from pathlib import Path

# `loadtest` is a package one folder up; locust only puts this file's folder on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locust import HttpUser, User, between, events, tag, task  # noqa: E402

from loadtest import corpus, payload  # noqa: E402

try:  # gRPC under gevent: must run before any channel is created
    import grpc.experimental.gevent as _grpc_gevent

    _grpc_gevent.init_gevent()
    import tritonclient.grpc as grpcclient

    _GRPC_IMPORT_ERROR: Exception | None = None
except Exception as exc:  # noqa: BLE001 - reported when a gRPC user starts
    grpcclient = None
    _GRPC_IMPORT_ERROR = exc


_EXIT_CODE: list[int] = []


@events.quit.add_listener
def _remember_exit_code(exit_code, **_kwargs):
    _EXIT_CODE.append(exit_code)


def _exit_without_finalizing() -> None:
    """With gRPC under gevent, the interpreter's final garbage collection sometimes deadlocks inside
    grpc's cygrpc (a mutex in a finalizer; SIGTERM does not help) after locust has written its reports and
    called sys.exit. Runs at exit after locust's own handlers (registered earlier, so it runs later):
    flush, then leave with locust's exit code and skip that finalization."""
    if not _EXIT_CODE:
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_CODE[-1])


if grpcclient is not None:
    atexit.register(_exit_without_finalizing)


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


MODEL = os.environ.get("RERANK_MODEL", payload.MODEL_NAME)
GRPC_URL = os.environ.get("TRITON_GRPC_URL", "localhost:8001")
CHECK = os.environ.get("LOAD_CHECK", "1") not in ("0", "false", "no")

REQUESTS = corpus.make_requests(
    _env_int("LOAD_DISTINCT_REQUESTS", 16),
    _env_int("LOAD_SEED", 0),
    n_docs=_env_int("LOAD_N_DOCS", corpus.N_DOCS),
    doc_tokens=_env_int("LOAD_DOC_TOKENS", corpus.DOC_TOKENS),
    query_tokens=_env_int("LOAD_QUERY_TOKENS", corpus.QUERY_TOKENS),
    top_n=_env_int("LOAD_TOP_N", corpus.TOP_N),
)
# serialised once: json.dumps of a 64-document body per request would cost the client CPU
HTTP_BODIES = [json.dumps(payload.kserve_json(r)).encode("utf-8") for r in REQUESTS]
_counter = itertools.count()


def _next_index() -> int:
    return next(_counter) % len(REQUESTS)


_GRPC_PAYLOADS: list | None = None


def _grpc_payloads() -> list:
    """Serialised gRPC inputs of REQUESTS, built once and shared by every gRPC user (the
    load generator's own CPU time is part of what it measures)."""
    global _GRPC_PAYLOADS
    if _GRPC_PAYLOADS is None:
        _GRPC_PAYLOADS = [payload.grpc_inputs(r, grpcclient) for r in REQUESTS]
    return _GRPC_PAYLOADS


@events.init.add_listener
def _drop_users_without_tasks(environment, **_kwargs):
    """With ``--tags grpc`` locust filters the HTTP user's task away but would still spawn
    that user (and fail); keep only the user classes that have a task left."""
    tags = getattr(environment.parsed_options, "tags", None) if environment.parsed_options else None
    excl = getattr(environment.parsed_options, "exclude_tags", None) if environment.parsed_options else None
    if not tags and not excl:
        return

    def runs(user_class) -> bool:
        for t in user_class.tasks:
            tset = getattr(t, "locust_tag_set", set())
            if tags and not (tset & set(tags)):
                continue
            if excl and (tset & set(excl)):
                continue
            return True
        return False

    kept = [u for u in environment.user_classes if runs(u)]
    if kept:
        environment.user_classes[:] = kept


class TritonHttpUser(HttpUser):
    """KServe v2 JSON over HTTP (Triton port 8000)."""

    wait_time = between(0, 0)
    host = os.environ.get("TRITON_HTTP_URL", "http://localhost:8000")

    @tag("http")
    @task
    def rerank_http(self):
        i = _next_index()
        req = REQUESTS[i]
        with self.client.post(
            f"/v2/models/{MODEL}/infer",
            data=HTTP_BODIES[i],
            headers={"Content-Type": "application/json"},
            name=f"http {MODEL}",
            catch_response=True,
        ) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200]}")
                return
            if CHECK:
                try:
                    out = payload.kserve_outputs(resp.json())
                    payload.check_result(len(req.documents), req.top_n, out[payload.contract.SCORES], out[payload.contract.RANKING])
                except (KeyError, ValueError) as exc:
                    resp.failure(f"bad response: {exc}")
                    return
            resp.success()


class TritonGrpcUser(User):
    """tritonclient.grpc (Triton port 8001); timing fired into locust's request event."""

    wait_time = between(0, 0)

    def on_start(self):
        if grpcclient is None:
            raise RuntimeError(f"TritonGrpcUser needs tritonclient[grpc]: {_GRPC_IMPORT_ERROR!r}")
        url = GRPC_URL
        if self.host and not self.host.startswith("http"):
            url = self.host  # `--host localhost:8001` also selects the gRPC endpoint
        self.triton = grpcclient.InferenceServerClient(url=url)

    def on_stop(self):
        client = getattr(self, "triton", None)
        if client is not None:
            client.close()

    @tag("grpc")
    @task
    def rerank_grpc(self):
        i = _next_index()
        req = REQUESTS[i]
        inputs, outputs = _grpc_payloads()[i]
        start = time.perf_counter()
        exc: Exception | None = None
        length = 0
        try:
            result = self.triton.infer(MODEL, inputs, outputs=outputs)
            scores = result.as_numpy(payload.contract.SCORES)
            ranking = result.as_numpy(payload.contract.RANKING)
            length = int(scores.nbytes + ranking.nbytes)
            if CHECK:
                payload.check_result(len(req.documents), req.top_n, scores.ravel(), ranking.ravel())
        except Exception as e:  # noqa: BLE001 - any failure is a failed request for locust
            exc = e
        self.environment.events.request.fire(
            request_type="grpc",
            name=f"grpc {MODEL}",
            response_time=(time.perf_counter() - start) * 1000.0,
            response_length=length,
            exception=exc,
            context={"n_docs": len(req.documents), "top_n": req.top_n},
        )
