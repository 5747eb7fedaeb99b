#!/usr/bin/env python3
"""Send tensors through the echo models of stub_roundtrip/model_repository over gRPC and HTTP.

- model `echo`: BYTES + FP32 through pb_utils.Tensor.as_numpy() and pb_utils.Tensor(name, ndarray)
- model `echo_dlpack` (with --dlpack): FP32 + INT64 through DLPack only (reported, not judged)

Exit 0 only if every check tried returned exactly what was sent.  One JSON line per protocol,
with the numpy version and path the stub reported, then ROUNDTRIP_RESULT PASS|FAIL."""
import argparse
import json
import sys
import time

import numpy as np

TEXTS = [b"abc", "d\u00e9j\u00e0 vu".encode(), b"", b"x" * 1000, b"\x00\x01\xff"]
VALUES = np.array([0.0, 1.5, -2.25, 3.0e7, np.float32(np.pi)], dtype=np.float32)
IDS = np.array([0, 1, -1, 2**40 + 7, 151643], dtype=np.int64)


class RawHTTP:
    """Minimal KServe-v2 HTTP client (binary tensor extension) on the standard library, for
    machines without tritonclient.http's gevent stack. Same calls as used below."""

    DT = {"BYTES": None, "FP32": np.float32, "INT64": np.int64}

    class InferInput:
        def __init__(self, name, shape, datatype):
            self.name, self.shape, self.datatype, self.raw = name, shape, datatype, b""

        def set_data_from_numpy(self, arr):
            if self.datatype == "BYTES":
                self.raw = b"".join(len(x).to_bytes(4, "little") + bytes(x) for x in arr.reshape(-1))
            else:
                self.raw = np.ascontiguousarray(arr, dtype=RawHTTP.DT[self.datatype]).tobytes()

    class InferRequestedOutput:
        def __init__(self, name):
            self.name = name

    class Result:
        def __init__(self, outs):
            self.outs = outs

        def as_numpy(self, name):
            return self.outs[name]

    def __init__(self, url):
        self.base = "http://" + url

    def is_model_ready(self, model):
        import urllib.request
        try:
            with urllib.request.urlopen(f"{self.base}/v2/models/{model}/ready", timeout=5) as r:
                return r.status == 200
        except Exception:
            return False

    def infer(self, model, inputs, outputs=None):
        import urllib.request
        head = {"inputs": [{"name": i.name, "shape": i.shape, "datatype": i.datatype,
                            "parameters": {"binary_data_size": len(i.raw)}} for i in inputs]}
        if outputs:
            head["outputs"] = [{"name": o.name, "parameters": {"binary_data": True}} for o in outputs]
        else:
            head["parameters"] = {"binary_data_output": True}
        hj = json.dumps(head).encode()
        req = urllib.request.Request(f"{self.base}/v2/models/{model}/infer", data=hj + b"".join(i.raw for i in inputs),
                                     headers={"Inference-Header-Content-Length": str(len(hj)),
                                              "Content-Type": "application/octet-stream"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                body, hl = r.read(), int(r.headers.get("Inference-Header-Content-Length", "0") or 0)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"HTTP {e.code}: {e.read()[:300]!r}") from None
        meta = json.loads(body[:hl] if hl else body)
        pos, outs = hl, {}
        for o in meta["outputs"]:
            n = o.get("parameters", {}).get("binary_data_size")
            if n is None:
                data = o["data"]
                outs[o["name"]] = np.array(data if o["datatype"] != "BYTES" else [x.encode() for x in data],
                                           dtype=RawHTTP.DT.get(o["datatype"]) or np.object_).reshape(o["shape"])
                continue
            raw, pos = body[pos:pos + n], pos + n
            if o["datatype"] == "BYTES":
                items, k = [], 0
                while k < len(raw):
                    ln = int.from_bytes(raw[k:k + 4], "little")
                    items.append(raw[k + 4:k + 4 + ln]); k += 4 + ln
                outs[o["name"]] = np.array(items, dtype=np.object_).reshape(o["shape"])
            else:
                outs[o["name"]] = np.frombuffer(raw, dtype=RawHTTP.DT[o["datatype"]]).reshape(o["shape"])
        return RawHTTP.Result(outs)


def client_for(proto, url, timeout, models):
    try:
        if proto == "httpraw":
            tc = RawHTTP
        elif proto == "grpc":
            import tritonclient.grpc as tc
        else:
            import tritonclient.http as tc
    except Exception as e:  # missing or version-gated client: skip this protocol
        raise ImportError(f"{type(e).__name__}: {e}"[:300]) from e
    client = RawHTTP(url) if proto == "httpraw" else tc.InferenceServerClient(url=url)
    deadline = time.time() + timeout
    for m in models:
        while True:
            try:
                if client.is_model_ready(m):
                    break
            except Exception:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"{proto}: model {m} not ready after {timeout}s")
            time.sleep(0.5)
    return tc, client


def check_dlpack(tc, client):
    inp = [tc.InferInput("VALUES", list(VALUES.shape), "FP32"), tc.InferInput("IDS", list(IDS.shape), "INT64")]
    inp[0].set_data_from_numpy(VALUES)
    inp[1].set_data_from_numpy(IDS)
    try:
        res = client.infer("echo_dlpack", inp)
        return bool(np.array_equal(res.as_numpy("VALUES_OUT"), VALUES) and np.array_equal(res.as_numpy("IDS_OUT"), IDS))
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:300]


def check_echo(tc, client):
    text = np.array(TEXTS, dtype=np.object_)
    inputs = [tc.InferInput("TEXT", list(text.shape), "BYTES"), tc.InferInput("VALUES", list(VALUES.shape), "FP32")]
    inputs[0].set_data_from_numpy(text)
    inputs[1].set_data_from_numpy(VALUES)
    outputs = [tc.InferRequestedOutput(n) for n in ("TEXT_OUT", "VALUES_OUT", "INFO")]
    try:
        res = client.infer("echo", inputs, outputs=outputs)
        _ = res.as_numpy("INFO")
    except Exception as e:
        return {"bytes_ok": False, "fp32_ok": False, "echo_error": f"{type(e).__name__}: {e}"[:300]}
    got_text = [bytes(x) for x in res.as_numpy("TEXT_OUT").tolist()]
    got_vals = res.as_numpy("VALUES_OUT")
    info = json.loads(res.as_numpy("INFO")[0])
    ok_text = got_text == TEXTS
    ok_vals = got_vals.dtype == np.float32 and np.array_equal(got_vals, VALUES)
    return {"bytes_ok": ok_text, "fp32_ok": bool(ok_vals), "stub_numpy": info["numpy"],
            "stub_numpy_file": info["numpy_file"], "stub_python": info["python"],
            "stub_executable": info["executable"],
            "got_text": None if ok_text else repr(got_text)[:200], "got_vals": None if ok_vals else repr(got_vals)[:200]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", default="localhost:8001")
    ap.add_argument("--http", default="localhost:8000")
    ap.add_argument("--protocols", default="grpc,http",
                    help="grpc, http (tritonclient.http: needs gevent), httpraw (standard library only)")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--dlpack", action="store_true", help="also check model echo_dlpack (first: a dying echo stub cannot hide it)")
    a = ap.parse_args()
    ok, ran = True, 0
    for proto in a.protocols.split(","):
        r = {"proto": proto}
        try:
            tc, client = client_for(proto, a.grpc if proto == "grpc" else a.http, a.timeout,
                                    ["echo_dlpack", "echo"] if a.dlpack else ["echo"])
        except ImportError as e:
            r["skipped"] = f"client import failed: {e}"
            print("ROUNDTRIP " + json.dumps(r), flush=True)
            continue
        except Exception as e:
            r["error"] = f"{type(e).__name__}: {e}"[:500]
            ok = False
            print("ROUNDTRIP " + json.dumps(r), flush=True)
            continue
        if a.dlpack:
            r["dlpack_ok"] = check_dlpack(tc, client)  # reported, not part of PASS
        r.update(check_echo(tc, client))
        ok, ran = ok and r["bytes_ok"] and r["fp32_ok"], ran + 1
        print("ROUNDTRIP " + json.dumps(r), flush=True)
    ok = ok and ran > 0
    print("ROUNDTRIP_RESULT " + ("PASS" if ok else "FAIL"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
