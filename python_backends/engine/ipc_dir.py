"""vLLM's IPC sockets in a directory of the engine step's own.

`AsyncLLM` talks to its engine-core process over ZeroMQ sockets that are files in `VLLM_RPC_BASE_PATH` (the
system's temporary directory by default), and no stop removes them: every server start left three socket files in
/tmp, a killed stub its own as well. The step gives vLLM a fresh directory (mode 700, so no other user can connect to
the engine either) and removes it whole: through the orphan guard, at close or after the stub's death, or at once
when the engine does not start. The directory is named after its server's shared-memory regions
(`triton_reranker_<port>_vllm-ipc-…`), so that a stop that had to kill the server's whole process group, the guards
with it, removes it as it removes the regions (scripts/stop_server.sh)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .orphan_guard import server_prefix

ENV = "VLLM_RPC_BASE_PATH"
SUFFIX = "vllm-ipc-"


@contextmanager
def private_ipc_dir() -> Iterator[str]:
    """A new directory for vLLM's sockets, named in the environment vLLM reads it from while an engine starts within
    the block, and only then: a process that starts engines one after another (the tests) must not hand the next
    one a directory removed with the last. An engine that fails to start within the block takes it along."""
    path = tempfile.mkdtemp(prefix=(server_prefix(os.getpid()) or "") + SUFFIX)
    before = os.environ.get(ENV)
    os.environ[ENV] = path
    try:
        yield path
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before


def remove_ipc_dirs(prefix: str) -> list[str]:
    """The socket directories of the server whose regions are named `prefix`..., removed: only once every process
    of that server has ended."""
    paths = sorted(Path(tempfile.gettempdir()).glob(f"{prefix}{SUFFIX}*"))
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    return [str(path) for path in paths]
