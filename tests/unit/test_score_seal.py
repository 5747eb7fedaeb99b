"""The engine's seal on its raw scores: the key every step of one server derives alike, and a seal that only the
scores it was made for verify."""

from __future__ import annotations

import os
import subprocess
import sys

import logging

import numpy as np

from python_backends.seal import ScoreSeal, server_key

SCORES = np.array([[0.5, -1.25, 3.0]], dtype=np.float32)


def test_two_children_of_one_server_derive_the_same_key_and_another_server_another():
    """Each step's stub is a child of tritonserver: two children of this process stand for two steps."""
    child = [sys.executable, "-c", "from python_backends.seal import server_key; print(server_key().hex())"]
    first, second = (subprocess.run(child, capture_output=True, text=True, check=True).stdout for _ in range(2))
    assert first == second == server_key(os.getpid()).hex() + "\n"
    assert server_key(os.getppid()) != server_key(os.getpid())


def test_the_seal_verifies_its_own_scores_only():
    seal = ScoreSeal(b"k" * 32)
    outputs = seal.outputs(SCORES[0])
    assert list(outputs) == ["RAW_SCORES", "SCORE_SEAL"] and outputs["SCORE_SEAL"].shape == (1, 1)
    assert seal.verifies_tensor(SCORES[0], outputs["SCORE_SEAL"])
    assert seal.verifies_tensor(SCORES[0].astype(np.float64), outputs["SCORE_SEAL"])  # the same float32 values
    changed = SCORES[0].copy()
    changed[1] += 1e-3
    assert not seal.verifies_tensor(changed, outputs["SCORE_SEAL"])
    assert not ScoreSeal(b"j" * 32).verifies_tensor(SCORES[0], outputs["SCORE_SEAL"])  # another server's key
    assert not seal.verifies_tensor(SCORES[0], None)  # a direct call without a seal
    assert not seal.verifies_tensor(SCORES[0], np.array([["forged"]], dtype=np.object_))
    assert not seal.verifies_tensor(SCORES[0], np.array([[b"a", b"b"]], dtype=np.object_))


def test_a_seal_that_does_not_verify_is_not_counted_and_said_once(caplog):
    seal = ScoreSeal(b"k" * 32)
    forged = np.array([[b"forged"]], dtype=np.object_)
    with caplog.at_level(logging.WARNING, logger="python_backends.seal"):
        assert seal.counts(SCORES[0], seal.outputs(SCORES[0])["SCORE_SEAL"])
        assert not seal.counts(SCORES[0], None)  # a direct call without a seal: nothing to say
        assert caplog.messages == []
        assert not seal.counts(SCORES[0], forged) and not seal.counts(SCORES[0], forged)
    assert len(caplog.messages) == 1 and caplog.messages[0].startswith("a SCORE_SEAL did not verify")


def test_a_sealed_answer_counts_once_and_only_while_fresh():
    """A caller who keeps sealed answers of the engine and sends them straight to calibrate: each counts the first time
    only, and none once FRESH_S has passed since the engine made it; the same scores sealed afresh (the same request
    through the ensemble again) count again."""
    now = [10**18]
    seal = ScoreSeal(b"k" * 32, clock=lambda: now[0])
    kept = seal.outputs(SCORES[0])["SCORE_SEAL"]
    assert [seal.counts(SCORES[0], kept) for _ in range(25)] == [True] + [False] * 24
    assert seal.counts(SCORES[0], seal.outputs(SCORES[0])["SCORE_SEAL"])
    late = seal.outputs(SCORES[0])["SCORE_SEAL"]
    now[0] += int(ScoreSeal.FRESH_S * 1e9) + 1
    assert not seal.counts(SCORES[0], late)
    assert seal.counts(SCORES[0], seal.outputs(SCORES[0])["SCORE_SEAL"])
