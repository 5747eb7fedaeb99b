"""The man-page set keeps the shape its README states, the shipped profile was fitted on it, its roff parsing and
BM25 do what the builder relies on, and the ranking metrics of the evaluation are exact on small cases."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from python_backends.calibrate.profile_schema import load_profile
from reranker_calibrate.bm25 import BM25
from reranker_calibrate.evaluation import ranking_quality
from reranker_calibrate.pair_scoring import LabelledPair, PrecomputedScorer, read_pairs

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "data" / "manpages" / "pairs.jsonl"
spec = importlib.util.spec_from_file_location("build_set", ROOT / "data" / "manpages" / "build_set.py")
build_set = importlib.util.module_from_spec(spec)
sys.modules["build_set"] = build_set  # its dataclasses look their module up
spec.loader.exec_module(build_set)


def test_set_shape_and_checksum():
    assert hashlib.sha256(SET.read_bytes()).hexdigest() == "a085903fd466ea20e83f2a2bebd8ba26580c9cb322f7ae238fafcececaff0905"
    pairs = read_pairs(SET)
    relevant = Counter(p.query for p in pairs if p.label == 1)
    assert (len(pairs), len({p.query for p in pairs})) == (3991, 500)
    assert set(relevant.values()) == {1} and len(relevant) == 500
    assert len({(p.query, p.document) for p in pairs}) == len(pairs)


def test_shipped_profile_was_fitted_on_the_set_and_stores_its_raw_score_bins():
    profile = load_profile(ROOT / "model_repository" / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json")
    assert profile.fitted_on["data_sha256"] == hashlib.sha256(SET.read_bytes()).hexdigest()
    assert profile.fitted_on["pairs"] == 3991 and len(profile.raw_score_distribution.fractions) == 10
    raw = PrecomputedScorer(SET.parent / "all-minilm-l6-v2" / "raw_scores.jsonl").score(read_pairs(SET))
    assert raw.raw_scores.size == 3991


def test_roff_page_parsing(tmp_path):
    page = tmp_path / "open.2.gz"
    page.write_bytes(gzip.compress(b"""'\\" t
.\\" SPDX-License-Identifier: Linux-man-pages-copyleft
.TH open 2 2023-02-05 "Linux man-pages 6.03"
.SH NAME
open, openat, creat \\- open and possibly create a file
.SH SYNOPSIS
.nf
.B #include <fcntl.h>
.fi
.SH DESCRIPTION
The
.BR open ()
system call opens the file specified by
.IR pathname .
If the file does not exist it may be created by
.BR open ()
when \\fBO_CREAT\\fP is given in flags, and its mode is taken from the mode argument of the call.
.EX
int fd = open("x", O_RDONLY);
.EE
.SH SEE ALSO
"""))
    parsed = build_set.parse_page(page)
    assert parsed.page == "open(2)" and parsed.names == ("open", "openat", "creat")
    assert parsed.query == "open and possibly create a file" and parsed.licence == "Linux-man-pages-copyleft"
    assert parsed.lead.startswith("The open() system call opens the file specified by pathname. If the file")
    assert "O_RDONLY" not in parsed.lead and parsed.family == "open"


def test_bm25_prefers_the_document_with_the_rare_query_term():
    bm25 = BM25(["close a file descriptor", "open a file", "open a socket", "read from a socket"])
    scores = [bm25.score("close the file", i) for i in range(4)]
    assert int(np.argmax(scores)) == 0 and scores[3] == 0.0


def test_ranking_quality_is_exact_on_two_queries():
    pairs = [LabelledPair("q1", "a", 0), LabelledPair("q1", "b", 1), LabelledPair("q1", "c", 0),
             LabelledPair("q2", "d", 1), LabelledPair("q2", "e", 0)]
    r = ranking_quality(pairs, np.array([0.9, 0.5, 0.1, 0.8, 0.2]))  # q1: relevant 2nd, q2: relevant 1st
    assert r.mrr == pytest.approx((0.5 + 1.0) / 2)
    assert r.ndcg_at_10 == pytest.approx((1 / np.log2(3) + 1.0) / 2)
    assert r.precision_at_1 == 0.5
