"""The gateway's command line and settings: `--help` says every environment variable it reads, `from_env` reads
exactly those, and docs/USAGE.md's settings table lists each and the paths its API key leaves open."""

from __future__ import annotations

import re
import subprocess
import sys

from gateway.guard import OPEN_PATHS
from gateway.settings import ENVIRONMENT, Settings
from tests.support.triton_server import ROOT

NAMES = [name for name, _, _ in ENVIRONMENT]


class Recording(dict):
    """An environment that records every variable asked for; the shadow's model is set, so its settings are read."""

    def __init__(self) -> None:
        super().__init__(GATEWAY_SHADOW_MODEL="candidate")
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)


def test_from_env_reads_exactly_the_listed_variables():
    env = Recording()
    Settings.from_env(env)
    assert env.asked == set(NAMES)


def test_the_usage_page_lists_every_variable_in_its_settings_table():
    page = (ROOT / "docs" / "USAGE.md").read_text()
    table = [line for line in page.splitlines() if line.startswith("| `TRITON_GRPC_URL`")
             or line.startswith(("| `GATEWAY_", "| `RERANK_MODEL`", "| `OTEL_"))]
    listed = {name for line in table for name in re.findall(r"`([A-Z_]+)`", line.split("|")[1])}
    assert listed == set(NAMES)


def test_the_usage_page_names_every_path_the_api_key_leaves_open():
    page = (ROOT / "docs" / "USAGE.md").read_text()
    (row,) = [line for line in page.splitlines() if line.startswith("| `GATEWAY_API_KEY`")]
    assert set(re.findall(r"`(/[a-z./]*)`", row.split("stay open")[0])) == OPEN_PATHS


def test_help_prints_every_variable_and_starts_nothing():
    done = subprocess.run([sys.executable, "-m", "gateway", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: reranker-gateway [-h]")
    assert [line.split()[0] for line in done.stdout.split("settings, from the environment")[1].splitlines()[1:]] == NAMES
    assert re.search(r"^  GATEWAY_PORT +8080: the port it listens on$", done.stdout, re.M)
    wrong = subprocess.run([sys.executable, "-m", "gateway", "--port", "1"], capture_output=True, text=True, timeout=60)
    assert (wrong.returncode, wrong.stderr.splitlines()[-1]) == (
        2, "reranker-gateway: error: unrecognized arguments: --port 1")


def test_a_setting_it_cannot_start_with_is_one_line_naming_it(tmp_path):
    """A shadow profile path that is not a file, and one that is not a profile: refused at start in one line, no
    traceback, exit status 1."""
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    for path, says in ((tmp_path / "gone.json", f"GATEWAY_SHADOW_PROFILE={tmp_path / 'gone.json'} is not a file"),
                       (broken, str(broken))):
        env = {"PATH": "/usr/bin:/bin", "GATEWAY_SHADOW_MODEL": "candidate", "GATEWAY_SHADOW_PROFILE": str(path),
               "GATEWAY_PORT": "0"}
        done = subprocess.run([sys.executable, "-m", "gateway"], capture_output=True, text=True, timeout=60, env=env,
                              cwd=ROOT)
        assert done.returncode == 1, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("reranker-gateway: ") and says in line, line
