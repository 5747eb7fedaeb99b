"""Print the modules the Triton Python models of a model repository import (one line, space-separated).

    python deploy/image/model_imports.py model_repository

Read from the source of every `<model>/<version>/model.py` (no import is executed here), so the image's import
check follows the models as they change. `triton_python_backend_utils` is left out: the Python backend's stub
provides it to the models, and it cannot be imported outside one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PROVIDED_BY_THE_STUB = {"triton_python_backend_utils"}


def imported_modules(source: str) -> set[str]:
    """Absolute module names of every import statement in `source`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {n for n in names if n.split(".")[0] not in PROVIDED_BY_THE_STUB and n != "__future__"}


def model_files(repository: Path) -> list[Path]:
    return sorted(repository.glob("*/[0-9]*/model.py"))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    files = model_files(Path(argv[0]))
    if not files:
        print(f"no */<version>/model.py under {argv[0]}", file=sys.stderr)
        return 1
    modules = set().union(*(imported_modules(f.read_text()) for f in files))
    print(" ".join(sorted(modules)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
