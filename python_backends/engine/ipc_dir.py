"""vLLM's IPC sockets in a directory of the engine step's own.

`AsyncLLM` talks to its engine-core process over ZeroMQ sockets that are files in `VLLM_RPC_BASE_PATH` (the
system's temporary directory by default), and no stop removes them: every server start left three socket files in
/tmp, a killed stub its own as well. The step gives vLLM a fresh directory (mode 700, so no other user can connect to
the engine either) and removes it whole: through the orphan guard, at close or after the stub's death, or at once
when the engine does not start."""

from __future__ import annotations

import os
import tempfile

ENV = "VLLM_RPC_BASE_PATH"
PREFIX = "vllm-ipc-"


def private_ipc_dir() -> str:
    """A new directory for vLLM's sockets, named in the environment vLLM reads it from when it starts an engine."""
    path = tempfile.mkdtemp(prefix=PREFIX)
    os.environ[ENV] = path
    return path
