"""A stand-in Triton server for the load-test tests: the KServe v2 gRPC and HTTP protocols on
loopback, serving one model `reranker` that follows docs/CONTRACT.md to the letter and rejects
any request that does not (wrong tensor name, datatype or shape, missing required input).

It exists so that loadtest/ (locust users, grpc_load.py, perf_analyzer's input file) can be run
end to end before the real ensemble exists. Scores are word overlap, squashed into 0..1;
nothing about them is meaningful beyond shape and order.

    python tests/deploy/fake_triton.py --grpc-port 18001 --http-port 18000   # by hand
"""

from __future__ import annotations

import argparse
import json
import math
import struct
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "reranker"
INPUTS = {  # name: (datatype, required) -- docs/CONTRACT.md
    "QUERY": ("BYTES", True),
    "DOCUMENTS": ("BYTES", True),
    "INSTRUCTION": ("BYTES", False),
    "TOP_N": ("INT32", False),
}
OUTPUTS = {"SCORES": "FP32", "RAW_SCORES": "FP32", "RANKING": "INT32", "TRUNCATED": "INT32", "CALIBRATION": "BYTES"}


class ContractError(ValueError):
    pass


def rerank(tensors: dict[str, tuple[str, list[int], list]], requested: list[str] | None):
    """Check a request against the contract and compute the outputs.
    ``tensors``: name -> (datatype, shape, flat values)."""
    for name in tensors:
        if name not in INPUTS:
            raise ContractError(f"unexpected input {name!r}")
    for name, (dtype, required) in INPUTS.items():
        if name not in tensors:
            if required:
                raise ContractError(f"missing required input {name!r}")
            continue
        got_dtype, shape, values = tensors[name]
        if got_dtype != dtype:
            raise ContractError(f"input {name!r} has datatype {got_dtype}, expected {dtype}")
        if len(shape) != 2 or shape[0] != 1:
            raise ContractError(f"input {name!r} has shape {shape}, expected [1, ...]")
        if name != "DOCUMENTS" and shape[1] != 1:
            raise ContractError(f"input {name!r} has shape {shape}, expected [1, 1]")
        if math.prod(shape) != len(values):
            raise ContractError(f"input {name!r}: shape {shape} but {len(values)} values")
    query = _text(tensors["QUERY"][2][0])
    docs = [_text(d) for d in tensors["DOCUMENTS"][2]]
    if not docs:
        raise ContractError("DOCUMENTS is empty")
    top_n = int(tensors["TOP_N"][2][0]) if "TOP_N" in tensors else len(docs)
    if top_n < 1:
        raise ContractError("TOP_N must be >= 1")
    qwords = {w.strip(".?,").lower() for w in query.split()}
    raw = []
    for d in docs:
        words = [w.strip(".?,").lower() for w in d.split()]
        raw.append(20.0 * sum(w in qwords for w in words) / max(1, len(words)) - 2.0)
    scores = [1.0 / (1.0 + math.exp(-x)) for x in raw]
    ranking = sorted(range(len(docs)), key=lambda i: (-scores[i], i))[: min(top_n, len(docs))]
    n = len(docs)
    out = {
        "SCORES": ("FP32", [1, n], scores),
        "RAW_SCORES": ("FP32", [1, n], raw),
        "RANKING": ("INT32", [1, len(ranking)], ranking),
        "TRUNCATED": ("INT32", [1, 1], [0]),
        "CALIBRATION": ("BYTES", [1, 1], ["fake-sigmoid@1"]),
    }
    if requested:
        for name in requested:
            if name not in out:
                raise ContractError(f"unknown output {name!r}")
        out = {k: v for k, v in out.items() if k in requested}
    return out


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.success = 0
        self.fail = 0
        self.ns = 0

    def add(self, ok: bool, ns: int):
        with self.lock:
            if ok:
                self.success += 1
                self.ns += ns
            else:
                self.fail += 1


# --------------------------------------------------------------------------------------- gRPC


def _decode_raw(dtype: str, shape: list[int], raw: bytes) -> list:
    if dtype == "BYTES":
        out, off = [], 0
        while off < len(raw):
            (n,) = struct.unpack_from("<I", raw, off)
            off += 4
            out.append(raw[off : off + n])
            off += n
        return out
    if dtype == "INT32":
        return list(struct.unpack(f"<{len(raw) // 4}i", raw))
    raise ContractError(f"datatype {dtype} not used by the contract")


def _encode_raw(dtype: str, values: list) -> bytes:
    if dtype == "BYTES":
        parts = []
        for v in values:
            b = v.encode("utf-8") if isinstance(v, str) else bytes(v)
            parts.append(struct.pack("<I", len(b)) + b)
        return b"".join(parts)
    if dtype == "FP32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "INT32":
        return struct.pack(f"<{len(values)}i", *values)
    raise ValueError(dtype)


def _contents_values(dtype: str, contents) -> list:
    if dtype == "BYTES":
        return list(contents.bytes_contents)
    if dtype == "INT32":
        return list(contents.int_contents)
    raise ContractError(f"datatype {dtype} not used by the contract")


def make_grpc_server(port: int, stats: Stats):
    import grpc
    from tritonclient.grpc import model_config_pb2 as mc
    from tritonclient.grpc import service_pb2 as pb
    from tritonclient.grpc import service_pb2_grpc as pbg

    type_of = {"BYTES": mc.TYPE_STRING, "INT32": mc.TYPE_INT32, "FP32": mc.TYPE_FP32}

    class Servicer(pbg.GRPCInferenceServiceServicer):
        def ServerLive(self, request, context):
            return pb.ServerLiveResponse(live=True)

        def ServerReady(self, request, context):
            return pb.ServerReadyResponse(ready=True)

        def ModelReady(self, request, context):
            return pb.ModelReadyResponse(ready=request.name == MODEL)

        def ServerMetadata(self, request, context):
            return pb.ServerMetadataResponse(name="fake-triton", version="2.51.0", extensions=[])

        def _check_model(self, name, context):
            if name != MODEL:
                context.abort(grpc.StatusCode.NOT_FOUND, f"Request for unknown model: '{name}' is not found")

        def ModelMetadata(self, request, context):
            self._check_model(request.name, context)
            TM = pb.ModelMetadataResponse.TensorMetadata
            return pb.ModelMetadataResponse(
                name=MODEL,
                versions=["1"],
                platform="ensemble",
                inputs=[TM(name=n, datatype=dt, shape=[-1, 1 if n != "DOCUMENTS" else -1]) for n, (dt, _) in INPUTS.items()],
                outputs=[TM(name=n, datatype=dt, shape=[-1, -1]) for n, dt in OUTPUTS.items()],
            )

        def ModelConfig(self, request, context):
            self._check_model(request.name, context)
            cfg = mc.ModelConfig(
                name=MODEL,
                backend="python",  # the real one is an ensemble; no composing models here
                max_batch_size=64,
                input=[
                    mc.ModelInput(
                        name=n, data_type=type_of[dt], dims=[-1 if n == "DOCUMENTS" else 1], optional=not req
                    )
                    for n, (dt, req) in INPUTS.items()
                ],
                output=[mc.ModelOutput(name=n, data_type=type_of[dt], dims=[-1]) for n, dt in OUTPUTS.items()],
            )
            return pb.ModelConfigResponse(config=cfg)

        def ModelStatistics(self, request, context):
            with stats.lock:
                s, f, ns = stats.success, stats.fail, stats.ns
            dur = pb.StatisticDuration
            return pb.ModelStatisticsResponse(
                model_stats=[
                    pb.ModelStatistics(
                        name=MODEL,
                        version="1",
                        last_inference=int(time.time() * 1000),
                        inference_count=s,
                        execution_count=s,
                        inference_stats=pb.InferStatistics(
                            success=dur(count=s, ns=ns),
                            fail=dur(count=f, ns=0),
                            queue=dur(count=s, ns=0),
                            compute_input=dur(count=s, ns=0),
                            compute_infer=dur(count=s, ns=ns),
                            compute_output=dur(count=s, ns=0),
                        ),
                    )
                ]
            )

        def ModelInfer(self, request, context):
            t0 = time.perf_counter_ns()
            self._check_model(request.model_name, context)
            try:
                tensors = {}
                raw = list(request.raw_input_contents)
                for k, inp in enumerate(request.inputs):
                    shape = list(inp.shape)
                    if raw:
                        values = _decode_raw(inp.datatype, shape, raw[k])
                    else:
                        values = _contents_values(inp.datatype, inp.contents)
                    tensors[inp.name] = (inp.datatype, shape, values)
                requested = [o.name for o in request.outputs] or None
                outs = rerank(tensors, requested)
            except ContractError as exc:
                stats.add(False, 0)
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            resp = pb.ModelInferResponse(model_name=MODEL, model_version="1", id=request.id)
            for name, (dtype, shape, values) in outs.items():
                resp.outputs.add(name=name, datatype=dtype, shape=shape)
                resp.raw_output_contents.append(_encode_raw(dtype, values))
            stats.add(True, time.perf_counter_ns() - t0)
            return resp

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    pbg.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")  # port 0: the kernel picks one
    if bound == 0:
        raise OSError(f"cannot bind gRPC port {port}")
    return server, bound


# --------------------------------------------------------------------------------------- HTTP


def make_http_server(port: int, stats: Stats) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path in ("/v2/health/ready", "/v2/health/live"):
                self._send(200, {})
            elif self.path == f"/v2/models/{MODEL}":
                self._send(200, {"name": MODEL, "versions": ["1"], "platform": "ensemble"})
            else:
                self._send(404, {"error": f"unknown path {self.path}"})

        def do_POST(self):
            t0 = time.perf_counter_ns()
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != f"/v2/models/{MODEL}/infer":
                self._send(404, {"error": f"unknown path {self.path}"})
                return
            try:
                req = json.loads(body)
                tensors = {i["name"]: (i["datatype"], list(i["shape"]), list(i["data"])) for i in req["inputs"]}
                requested = [o["name"] for o in req.get("outputs", [])] or None
                outs = rerank(tensors, requested)
            except (ContractError, KeyError, TypeError, ValueError) as exc:
                stats.add(False, 0)
                self._send(400, {"error": str(exc)})
                return
            stats.add(True, time.perf_counter_ns() - t0)
            self._send(
                200,
                {
                    "model_name": MODEL,
                    "model_version": "1",
                    "outputs": [
                        {"name": n, "datatype": dt, "shape": s, "data": v} for n, (dt, s, v) in outs.items()
                    ],
                },
            )

    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


class FakeTriton:
    """Both endpoints on loopback (ports the kernel picks unless given);
    ``with FakeTriton() as t: t.grpc_url, t.http_url``."""

    def __init__(self, grpc_port: int = 0, http_port: int = 0):
        self.stats = Stats()
        self._grpc, self.grpc_port = make_grpc_server(grpc_port, self.stats)
        self._http = make_http_server(http_port, self.stats)
        self.http_port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def __enter__(self):
        self._grpc.start()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc-port", type=int, default=18001)
    ap.add_argument("--http-port", type=int, default=18000)
    ap.add_argument("--seconds", type=float, default=600.0, help="stop by itself after this long")
    a = ap.parse_args()
    with FakeTriton(a.grpc_port, a.http_port) as t:
        print(f"fake triton: grpc {t.grpc_url}, http {t.http_url}", flush=True)
        time.sleep(a.seconds)
