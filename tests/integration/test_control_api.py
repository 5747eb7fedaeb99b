"""The server is closed by default: its ports listen on the loopback interface only, and the model-repository API,
which can load a model from uploaded files (code the server then runs), answers only callers with the admin key:
HTTP header `admin-key`, gRPC metadata `triton-grpc-protocol-admin-key` (Triton prefixes the gRPC key itself)."""

from __future__ import annotations

import base64
import ipaddress
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.support.triton_server import RunningServer

pytestmark = pytest.mark.integration

GRPC_KEY = "triton-grpc-protocol-admin-key"
INTRUDER = "intruder"
INTRUDER_CONFIG = json.dumps({"name": INTRUDER, "backend": "python", "max_batch_size": 0,
                              "input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [1]}],
                              "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]}]})


def _intruder_model(marker: Path) -> bytes:
    """A model.py that proves it ran by writing `marker` as soon as the stub imports it."""
    return (f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
            "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n").encode()


def _http_load(server: RunningServer, model_py: bytes, headers: dict[str, str]) -> tuple[int, str]:
    body = json.dumps({"parameters": {"config": INTRUDER_CONFIG,
                                      "file:1/model.py": base64.b64encode(model_py).decode()}}).encode()
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/models/{INTRUDER}/load", data=body,
                                     method="POST", headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _repository_index(server: RunningServer) -> list[str]:
    request = urllib.request.Request(f"http://{server.http_url}/v2/repository/index", data=b"{}", method="POST",
                                     headers={"admin-key": server.admin_key})
    with urllib.request.urlopen(request, timeout=30) as response:
        return [entry["name"] for entry in json.load(response)]


@pytest.mark.parametrize("headers", [{}, {"admin-key": "not-the-key"}], ids=["no key", "wrong key"])
def test_http_load_with_uploaded_code_is_refused_without_the_key(server, tmp_path, headers):
    marker = tmp_path / "ran"
    status, body = _http_load(server, _intruder_model(marker), headers)
    assert status == 403, body
    assert "admin-key" in body
    assert not marker.exists()
    assert INTRUDER not in _repository_index(server)


@pytest.mark.parametrize("headers", [None, {GRPC_KEY: "not-the-key"}], ids=["no key", "wrong key"])
def test_grpc_load_with_uploaded_code_is_refused_without_the_key(server, tmp_path, headers):
    marker = tmp_path / "ran"
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        with pytest.raises(InferenceServerException) as raised:
            client.load_model(INTRUDER, headers=headers, config=INTRUDER_CONFIG,
                              files={"file:1/model.py": _intruder_model(marker)})
    finally:
        client.close()
    assert raised.value.status() == "StatusCode.UNAVAILABLE"
    assert "admin-key" in raised.value.message()
    assert not marker.exists()
    assert INTRUDER not in _repository_index(server)


def test_the_key_opens_the_repository_api_and_inference_needs_none(server):
    assert {"reranker", "rerank_preprocess", "rerank_engine", "rerank_calibrate"} <= set(_repository_index(server))
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        assert client.is_model_ready("reranker")
        assert [model.name for model in client.get_model_repository_index(headers={GRPC_KEY: server.admin_key}).models]
    finally:
        client.close()


def _listening(port: int) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses listening on `port` (IPv6 ones as their mapped IPv4, ::ffff:127.0.0.1 for gRPC's), from the
    kernel's socket tables, which write an address as the hex of its bytes in host (little-endian) order by word."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            hex_address, hex_port = local.rsplit(":", 1)
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = b"".join(bytes.fromhex(hex_address[i:i + 8])[::-1] for i in range(0, len(hex_address), 8))
            address = ipaddress.ip_address(raw)
            addresses.append(address.ipv4_mapped or address if address.version == 6 else address)
    return addresses


def test_every_port_listens_on_loopback_only(server):
    for url in (server.http_url, server.grpc_url, server.metrics_url):
        addresses = _listening(int(url.rsplit(":", 1)[1]))
        assert addresses and all(address.is_loopback for address in addresses), (url, addresses)
