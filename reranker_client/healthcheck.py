"""Deep health check: one real rerank request through the whole ensemble.

Triton 2.51 keeps a Python model READY after its stub process died, so `/v2/health/ready` alone can stay green while
every request fails. Use this as a liveness/readiness exec probe where the client is installed:

    python -m reranker_client.healthcheck --url localhost:8001      # exit 0 healthy, 1 not (reason on stderr)
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tritonclient.utils import InferenceServerException

from python_backends.contract import STUB_DEAD, ErrorKind

from .aio import AsyncRerankClient
from .client import RerankClient
from .server_errors import read_error

QUERY = "What is the capital of France?"
DOCUMENTS = ("Bananas are a good source of potassium.", "Paris is the capital and largest city of France.")


def check(url: str, protocol: str = "grpc", timeout_s: float = 10.0, busy_is_healthy: bool = False) -> str | None:
    """None when the ensemble answers and ranks the obvious document first, else why not. With `busy_is_healthy`,
    no answer within `timeout_s` (gRPC deadline) counts as healthy: a loaded server queues the check behind real
    work, while a dead engine answers at once with an error (the readiness probe's use)."""
    client = RerankClient(url, protocol=protocol, max_retries=0, timeout_s=timeout_s)
    try:
        response = client.rerank(QUERY, list(DOCUMENTS))
    except InferenceServerException as exc:
        if busy_is_healthy and read_error(exc).kind is ErrorKind.DEADLINE:
            return None
        return f"rerank request failed: {exc}"
    except OSError as exc:
        return f"rerank request failed: {exc}"
    finally:
        client.close()
    if [r.index for r in response.results] != [1, 0]:
        return f"wrong ranking {[r.index for r in response.results]} for the probe pair"
    return None


async def _failure(client: AsyncRerankClient, busy_after_s: float) -> Exception | None:
    """The probe pair's failure on an open async client, or None: it answered, or has not within `busy_after_s` (a
    busy server; its call is cancelled then)."""
    try:
        await asyncio.wait_for(client.rerank(QUERY, list(DOCUMENTS)), busy_after_s)
    except TimeoutError:
        return None
    except Exception as exc:  # noqa: BLE001 - any failed answer is the verdict, not a crash of the probe
        return exc
    return None


async def answer_error(client: AsyncRerankClient, busy_after_s: float) -> str | None:
    """Why the ensemble fails the probe pair (the gateway's /health), or None: it answered (whatever its ranking: a
    client serves any checkpoint, trained or not) or is busy."""
    failure = await _failure(client, busy_after_s)
    return None if failure is None else f"rerank request failed: {failure}"


async def engine_dead(client: AsyncRerankClient, busy_after_s: float) -> InferenceServerException | None:
    """The error the probe pair meets when the ensemble's engine is dead, else None: a stub Triton reports not
    healthy (in Triton's words, whatever the status: a new request gets INTERNAL over gRPC), or a vLLM engine its
    step reports dead."""
    failure = await _failure(client, busy_after_s)
    if isinstance(failure, InferenceServerException) and (
            STUB_DEAD.search(str(failure)) or read_error(failure).kind is ErrorKind.ENGINE_DEAD):
        return failure
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="localhost:8001")
    parser.add_argument("--protocol", choices=("grpc", "http"), default="grpc")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--busy-is-healthy", action="store_true",
                        help="no answer within --timeout (gRPC) counts as healthy: only an error answer fails")
    args = parser.parse_args(argv)
    problem = check(args.url, args.protocol, args.timeout, args.busy_is_healthy)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
