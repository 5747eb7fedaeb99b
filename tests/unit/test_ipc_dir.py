"""The engine step's directory of vLLM's sockets: named after its server's regions, private, removed whole."""

from __future__ import annotations

import os
import site
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from python_backends.engine.ipc_dir import ENV, SUFFIX, private_ipc_dir, remove_ipc_dirs
from tests.support.triton_server import ROOT

# Run by a link to Python named triton_python_backend_stub with a region as its command line's third word, it is a
# Python-backend stub to `server_prefix`.
FAKE_STUB = """import os
from python_backends.engine.ipc_dir import ENV, private_ipc_dir
with private_ipc_dir() as path:
    print(path, os.environ[ENV])
"""


def test_a_stubs_directory_is_named_after_its_servers_regions_and_only_that_servers_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script, stub = tmp_path / "model.py", tmp_path / "triton_python_backend_stub"
    script.write_text(FAKE_STUB)
    stub.symlink_to(sys.executable)  # run by its link, Python is outside its venv: the venv's packages by path
    packages = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    made = [subprocess.run([str(stub), str(script), region], capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONPATH=packages, TMPDIR=str(tmp_path))).stdout.split()
            for region in ("triton_reranker_8123_0f1e", "triton_reranker_8124_77aa")]
    assert [path == told for path, told in made] == [True, True]  # vLLM is told the directory it was given
    ours, other = (Path(path) for path, _ in made)
    assert ours.name.startswith("triton_reranker_8123_vllm-ipc-") and ours.parent == tmp_path
    assert stat.S_IMODE(ours.stat().st_mode) == 0o700
    assert remove_ipc_dirs("triton_reranker_8123_") == [str(ours)]
    assert not ours.exists() and other.exists()


def test_outside_a_stub_the_directory_has_no_servers_name_and_is_named_to_vllm_only_within_the_block(
        tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv(ENV, "/the/callers/own")
    with private_ipc_dir() as made:
        assert Path(made).name.startswith("vllm-ipc-") and os.environ[ENV] == made
    assert os.environ[ENV] == "/the/callers/own" and Path(made).is_dir()  # removed by its engine's guard
    with pytest.raises(RuntimeError), private_ipc_dir() as failed:
        raise RuntimeError("the engine did not start")
    assert not Path(failed).exists() and os.environ[ENV] == "/the/callers/own"


def test_the_stop_script_removes_the_directories_this_module_names():
    """scripts/stop_server.sh, which runs without the project's Python, spells the directories' suffix itself."""
    script = (ROOT / "scripts" / "stop_server.sh").read_text()
    assert f'rm -rf "${{TMPDIR:-/tmp}}/$(shm_prefix "${{port%.pid}}"){SUFFIX}"*' in script
