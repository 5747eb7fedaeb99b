"""Requests large enough to still be in vLLM a second after they were sent: what the fault tests send before they
kill a part of the server, and how each ended."""

from __future__ import annotations

import time

from tritonclient.utils import InferenceServerException

from reranker_client import RerankClient
from tests.support.triton_server import PROBE_QUERY, RunningServer

# 64 documents cut at the CPU model's 256 tokens
IN_FLIGHT_DOCUMENTS = [f"document {i} " + "about the capital cities of Europe and their rivers " * 40 for i in range(64)]


def in_flight_outcome(server: RunningServer, protocol: str, deadline_s: float) -> tuple[str, float]:
    """One large request with a client deadline: how it ended ("answered", "error: ...", "client deadline: ...") and
    when."""
    client = RerankClient(server.url(protocol), protocol=protocol, max_retries=0, timeout_s=deadline_s)
    started = time.monotonic()
    try:
        client.rerank(PROBE_QUERY, IN_FLIGHT_DOCUMENTS)
        return "answered", time.monotonic() - started
    except InferenceServerException as exc:
        return f"error: {exc.message()[:60]}", time.monotonic() - started
    except Exception as exc:  # noqa: BLE001 - the HTTP client's own deadline raises its socket's error
        return f"client deadline: {type(exc).__name__}", time.monotonic() - started
    finally:
        client.close()
