#!/usr/bin/env bash
# Installs this project's package (python_backends, reranker_client, gateway) into a Python environment and
# checks that what the Triton models import comes from that environment. The image builds run it
# (deploy/image/Dockerfile, deploy/image/Dockerfile.cpu, deploy/gateway/Dockerfile) and CI runs it too, into a
# fresh venv (tests/deploy/test_image.py).
#
#   deploy/image/install_project.sh [options] SRC     SRC: the project folder (holds pyproject.toml)
#
# Options:
#   --python PY        the interpreter whose environment receives the package (default python3)
#   --extras LIST      pyproject extras, comma-separated (default server,client)
#   --requirements F   also install this requirements file (exact pins, e.g. the gateway's)
#   --models DIR       a model repository: every module its <model>/<version>/model.py files import must import
#   --check MODULE     one more module that must import (repeatable)
#   --expect DIST      a distribution that must already be installed, e.g. the image's vllm (checked and
#                      printed, not imported: no GPU at build time) (repeatable)
#   --no-index         deps must already be installed: pip may not download any (CI: the project's .venv
#                      stands in for the image's packages); the project's own wheel is still built
#
# The packages already in the environment are held at their versions (a constraints file written from the
# environment before the install): pip adds what is missing but cannot replace, say, the image's vLLM, torch
# or numpy; a conflict fails the install with pip's message instead of breaking the image silently.
set -euo pipefail

PYTHON=python3
EXTRAS=server,client
REQUIREMENTS=""
MODELS=""
CHECK=""
EXPECT=""
no_index=()
while [ $# -gt 0 ]; do
  case $1 in
    --python) PYTHON=$2; shift 2 ;;
    --extras) EXTRAS=$2; shift 2 ;;
    --requirements) REQUIREMENTS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --check) CHECK="$CHECK $2"; shift 2 ;;
    --expect) EXPECT="$EXPECT $2"; shift 2 ;;
    --no-index) no_index=(--no-index); shift ;;
    -*) echo "install_project: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [options] SRC (see the header of this file)" >&2; exit 2; }
src=$(cd "$1" && pwd)
[ -f "$src/pyproject.toml" ] || { echo "install_project: no pyproject.toml in $src" >&2; exit 2; }

log() { echo "[install_project] $*" >&2; }
pip() { "$PYTHON" -m pip --disable-pip-version-check "$@"; }
project=$(sed -n 's/^name *= *"\(.*\)"/\1/p' "$src/pyproject.toml" | head -n 1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

log "python: $("$PYTHON" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

# 0. What the environment must bring itself (e.g. the image's vLLM): there before anything is installed.
for dist in $EXPECT; do
  version=$("$PYTHON" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$dist") \
    || { log "$dist is not installed in $("$PYTHON" -c 'import sys; print(sys.prefix)')"; exit 1; }
  log "expected $dist: $version"
done

# 1. Hold every package already installed at its version (the project itself excepted).
"$PYTHON" - "$project" > "$tmp/held.txt" <<'EOF'
import importlib.metadata as md
import re
import sys

from pip._vendor.packaging.version import InvalidVersion, Version


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def valid(version):
    try:
        Version(version)
    except InvalidVersion:  # e.g. a distro package's own version scheme: pip could not read the pin
        return False
    return True


own = canonical(sys.argv[1])
held = {}
for dist in md.distributions():  # in sys.path order: the first of two copies is the one Python imports
    name, version = dist.metadata["Name"], dist.version
    if name and version and canonical(name) != own and valid(version):
        held.setdefault(canonical(name), f"{canonical(name)}=={version}")
print("\n".join(sorted(held.values())))
EOF
log "holding $(wc -l < "$tmp/held.txt") installed packages at their versions"

# 2. The project's wheel, built from a clean copy of pyproject.toml and the packages it includes (never in
#    the tree itself: a stale build/ or *.egg-info there would go into the wheel), in pip's isolated build
#    environment; then the wheel with its extras.
mkdir "$tmp/src"
"$PYTHON" - "$src" "$tmp/src" <<'EOF'
import fnmatch
import shutil
import sys
import tomllib
from pathlib import Path

src, dst = map(Path, sys.argv[1:])
include = tomllib.loads((src / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
shutil.copy2(src / "pyproject.toml", dst)
for folder in sorted(src.iterdir()):
    if (folder / "__init__.py").is_file() and any(fnmatch.fnmatch(folder.name, p) for p in include):
        shutil.copytree(folder, dst / folder.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
EOF
pip wheel -q --no-deps -w "$tmp/wheel" "$tmp/src"
wheel=$(ls "$tmp"/wheel/*.whl)
pip install -q --no-deps --force-reinstall "$wheel"
args=(-c "$tmp/held.txt" "${wheel}[${EXTRAS}]")
[ -n "$REQUIREMENTS" ] && args+=(-r "$REQUIREMENTS")
log "pip install ${no_index[*]} $(basename "$wheel")[${EXTRAS}] ${REQUIREMENTS:+-r $REQUIREMENTS}"
pip install -q "${no_index[@]}" "${args[@]}"

# 3. Import what the models import, from outside the source tree, and show where each came from.
modules=$CHECK
if [ -n "$MODELS" ]; then
  modules="$modules $("$PYTHON" "$src/deploy/image/model_imports.py" "$MODELS")"
fi
if [ -n "${modules// /}" ]; then
  (cd / && "$PYTHON" - $modules <<'EOF'
import importlib
import sys

for name in sys.argv[1:]:
    module = importlib.import_module(name)
    print(f"[install_project] import {name}: {getattr(module, '__file__', None) or 'built-in'}", file=sys.stderr)
EOF
  )
fi
log "ok: $project installed into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
