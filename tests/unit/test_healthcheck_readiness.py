"""The readiness use of the deep health check (`--busy-is-healthy`): a server that takes the request but has not
answered by the deadline (queued behind load) counts as ready; a server that refuses or errs does not."""

from __future__ import annotations

import socket
import time
from concurrent import futures

import grpc
import pytest
from tritonclient.grpc import service_pb2

from python_backends.model_repository import REPOSITORY, config_path, read_config
from reranker_client.healthcheck import check, main


class Slow(grpc.GenericRpcHandler):
    """Answers the model configuration at once (Triton does, whatever its load) and holds every inference past any
    probe deadline, then fails it: a server whose queue holds the check."""

    def service(self, handler_call_details):
        if handler_call_details.method.endswith("/ModelConfig"):  # the committed configs: the limits
            return grpc.unary_unary_rpc_method_handler(
                lambda request, context: service_pb2.ModelConfigResponse(
                    config=read_config(config_path(REPOSITORY, request.name))),
                request_deserializer=service_pb2.ModelConfigRequest.FromString,
                response_serializer=service_pb2.ModelConfigResponse.SerializeToString)

        def wait(request, context):
            time.sleep(3)
            context.abort(grpc.StatusCode.UNAVAILABLE, "still queued")

        return grpc.unary_unary_rpc_method_handler(wait)


@pytest.fixture
def slow_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((Slow(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_no_answer_by_the_deadline_is_ready_only_with_busy_is_healthy(slow_server):
    assert check(slow_server, timeout_s=1.0, busy_is_healthy=True) is None
    problem = check(slow_server, timeout_s=1.0)
    assert problem is not None and problem.startswith("rerank request failed:") and "Deadline" in problem


def test_a_refused_connection_is_unhealthy_even_when_busy_counts_as_healthy(capsys):
    assert main(["--url", closed_port(), "--timeout", "1", "--busy-is-healthy"]) == 1
    assert capsys.readouterr().err.startswith("unhealthy: rerank request failed:")
