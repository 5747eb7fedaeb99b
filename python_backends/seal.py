"""The engine's seal on its raw scores, so the calibrate step can tell the ensemble's traffic from a direct call.

The drift gauge (`reranker_score_drift_psi`) must describe the scores the served model gives: one direct call to
`rerank_calibrate` with made-up RAW_SCORES would otherwise fill its window and move, or hide, the alert. The engine
step answers with SCORE_SEAL beside RAW_SCORES: a nonce (the answer's time and 8 random bytes) and an HMAC-SHA256 of
the nonce and the scores' float32 bytes. The ensemble hands both to calibrate, which calibrates every request but
counts scores for drift only when their seal verifies, is fresh (issued within `FRESH_S`) and was not counted
before: a caller who keeps a sealed answer of the engine and sends it to calibrate again and again moves the gauge as
that one answer did, while the same request sent twice through the ensemble gets two seals and counts twice.

The key is derived from what every step of one tritonserver shares and a caller over the network cannot know: the
host's boot id and the server process's pid and start time (each step's stub is a child of tritonserver). So both
steps compute it without a file or a setting, and a restarted server has a key of its own. That is the trust
boundary: a user logged in to the host can read those three and forge seals; callers over the network cannot.

Why not simpler: the ensemble's steps are models of the server like `reranker`, callable by whoever reaches its port,
and Triton 2.51 has no per-model access control for inference; a gauge fed by any caller of `rerank_calibrate` could
be set to any value by one request. Computing drift outside the server (the gateway) would leave out every client that
calls Triton directly.

    >>> seal = ScoreSeal(b"k" * 32)
    >>> scores = np.array([0.5, -1.25], dtype=np.float32)
    >>> seal.verifies(scores, seal.seal(scores)), seal.verifies(scores + 1, seal.seal(scores))
    (True, False)
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import struct
import threading
import time
from pathlib import Path

import numpy as np

from .contract import RAW_SCORES, SCORE_SEAL

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
log = logging.getLogger(__name__)


def server_key(pid: int | None = None) -> bytes:
    """The key of the server process `pid` (default: this process's parent, the tritonserver of a step's stub)."""
    pid = os.getppid() if pid is None else pid
    # /proc/PID/stat: the fields after the command's closing parenthesis start at field 3; field 22 is the start time
    start = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return hashlib.sha256(f"reranker-score-seal\0{BOOT_ID.read_text().strip()}\0{pid}\0{start}".encode()).digest()


class ScoreSeal:
    FRESH_S = 120.0  # a seal counts only this long after the engine made it; the ones counted are remembered as long
    NONCE = struct.Struct(">Q8s")  # the answer's time (ns since the epoch) and 8 random bytes

    def __init__(self, key: bytes | None = None, clock=time.time_ns) -> None:
        self._key = server_key() if key is None else key
        self._clock = clock
        self._warned = False
        self._counted: dict[bytes, int] = {}  # nonce -> its time, for FRESH_S
        self._lock = threading.Lock()

    def seal(self, scores: np.ndarray) -> bytes:
        """A fresh seal of `scores`: nonce + MAC."""
        nonce = self.NONCE.pack(self._clock(), os.urandom(8))
        return nonce + self._mac(nonce, scores)

    def _mac(self, nonce: bytes, scores: np.ndarray) -> bytes:
        data = np.ascontiguousarray(scores, dtype="<f4").tobytes()
        return hmac.new(self._key, nonce + data, hashlib.sha256).digest()

    def verifies(self, scores: np.ndarray, seal: bytes | None) -> bool:
        if seal is None or len(seal) != self.NONCE.size + hashlib.sha256().digest_size:
            return False
        nonce, mac = seal[:self.NONCE.size], seal[self.NONCE.size:]
        return hmac.compare_digest(self._mac(nonce, scores), mac)

    def outputs(self, scores: np.ndarray) -> dict[str, np.ndarray]:
        """The engine's answer to one request: RAW_SCORES [1, N] and its SCORE_SEAL [1, 1]."""
        raw = scores[None, :].astype(np.float32)
        return {RAW_SCORES: raw, SCORE_SEAL: np.array([[self.seal(raw)]], dtype=np.object_)}

    def verifies_tensor(self, scores: np.ndarray, seal: np.ndarray | None) -> bool:
        """Whether a request's SCORE_SEAL tensor (absent on a direct call) is the seal of its scores."""
        if seal is None or seal.size != 1:
            return False
        value = seal.reshape(-1)[0]
        return isinstance(value, bytes) and self.verifies(scores, value)

    def counts(self, scores: np.ndarray, seal: np.ndarray | None) -> bool:
        """Whether a request's scores count for drift: their seal verifies, is fresh and was not counted before. A
        seal that is there and does not verify is said once in the log: a forged one, or steps whose keys differ,
        which would leave the drift gauge empty."""
        if self.verifies_tensor(scores, seal):
            return self._first_and_fresh(seal.reshape(-1)[0][:self.NONCE.size])
        if seal is not None and not self._warned:
            self._warned = True
            log.warning("a SCORE_SEAL did not verify: its scores are calibrated but not counted for drift. Forged, "
                        "or the engine and calibrate steps derive different keys (each step's stub must be a child "
                        "of the same tritonserver process)")
        return False

    def _first_and_fresh(self, nonce: bytes) -> bool:
        now, horizon = self._clock(), int(self.FRESH_S * 1e9)
        issued = self.NONCE.unpack(nonce)[0]
        with self._lock:
            while self._counted:  # oldest first: they were counted in about the order they were made
                oldest = next(iter(self._counted))
                if now - self._counted[oldest] <= horizon:
                    break
                del self._counted[oldest]
            if abs(now - issued) > horizon or nonce in self._counted:
                return False
            self._counted[nonce] = issued
            return True
