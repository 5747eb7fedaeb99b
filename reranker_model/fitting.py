"""`reranker-model fit NAME pairs.jsonl`: the variant's own calibration, installed where the variant reads it.

The labelled pairs are scored through the variant's preprocess and engine (`offline.score_rows`, the served
RAW_SCORES), every method is fitted (`reranker_calibrate`), and the chosen profile replaces the file the variant's
engine config names (`calibration_profile`), under the name, model, checkpoint and score type of the profile that is
there: the ones the calibrate step checks before it swaps a new file in. A running server's calibrate step reloads
that file when it changes, so the next request is answered on the new profile without a restart.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from python_backends.calibrate.profile_schema import CalibrationProfile, load_profile
from python_backends.model_repository import CALIBRATE, ENGINE, VariantModel, config_dict, config_path

from .offline import read_pair_rows, score_rows


@dataclass(frozen=True)
class Installed:
    """Where a variant's profile lives and the profile there now."""

    path: Path
    profile: CalibrationProfile
    model: str

    @classmethod
    def of_variant(cls, repository: Path, name: str) -> "Installed":
        engine_file = config_path(repository, ENGINE, name, fallback=False)
        variant = VariantModel(engine_file, config_dict(engine_file))
        path = repository / CALIBRATE / variant.calibration_profile
        if not path.is_file():
            raise FileNotFoundError(f"{path}: variant '{name}' names this profile and it is not there; "
                                    f"`reranker-model add {name} ... --force` writes a first one")
        return cls(path, load_profile(path), variant.model)


def shown(path: Path) -> str:
    """A path as the user would type it here: relative to the working directory when under it."""
    return str(path.resolve().relative_to(Path.cwd())) if path.resolve().is_relative_to(Path.cwd()) else str(path)


def next_version(current: str, today: datetime.date) -> str:
    """Today's date and a count: the day's first fit is <date>.1, a later one the next number."""
    day = today.isoformat()
    prefix, _, count = current.partition(".") if current.startswith(day) else ("", "", "")
    number = int(count) + 1 if prefix == day and count.isdigit() else 1
    return f"{day}.{number}"


def fit_variant(repository: Path, name: str, pairs_path: Path, report_dir: Path, version: str | None = None,
                instruction: str | None = None, quiet: bool = False) -> list[str]:
    """Score, fit and install; the lines to print."""
    from reranker_calibrate.cli import fit_and_write
    from reranker_calibrate.pair_scoring import ScoreResult, read_pairs

    import numpy as np

    installed = Installed.of_variant(repository, name)
    pairs = read_pairs(pairs_path)  # labels checked before the engine starts
    scored = score_rows(repository, name, read_pair_rows(pairs_path), instruction, progress=not quiet)
    raw = np.asarray([row["raw_score"] for row in scored.rows], dtype=np.float64)
    current = installed.profile
    lines = [f"scored {len(pairs)} pairs through variant '{name}' in {scored.seconds:.1f} s"]
    lines += fit_and_write(
        pairs_path, pairs, ScoreResult(raw, None), f"reranker-model score {name}", Path(shown(installed.path)), report_dir,
        checkpoint=current.checkpoint, quiet=quiet, name=current.name,
        version=version or next_version(current.version, datetime.date.today()), model=installed.model,
        score_type=current.score_type,
    )
    lines.append(f"installed: variant '{name}' serves {installed.path.stem} from its next request (the calibrate step "
                 "reloads the file; no restart)")
    return lines
