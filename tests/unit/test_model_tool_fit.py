"""reranker-model fit and score: which requests the pairs make (a line's own instruction kept), the profile's next
version, and what fit refuses before an engine starts. The whole path (add -> fit -> served) runs in
tests/gateway/test_two_models.py, as docs/YOUR_MODEL.md shows it."""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path

import pytest

from reranker_model.cli import main
from reranker_model.fitting import next_version
from reranker_model.offline import read_pair_rows, requests_of
from tests.support.tiny_models import session_models
from tests.support.triton_server import copy_repository


def test_a_lines_own_instruction_makes_its_own_request_and_the_others_take_the_given_one():
    rows = [{"query": "q", "document": "a"}, {"query": "q", "document": "b", "instruction": "judge"},
            {"query": "q", "document": "c"}, {"query": "r", "document": "d", "instruction": "judge"}]
    assert requests_of(rows, "default one", 64) == [("q", "default one", [0, 2]), ("q", "judge", [1]),
                                                    ("r", "judge", [3])]
    assert requests_of(rows, None, 64)[0] == ("q", None, [0, 2])


def test_a_query_with_more_documents_than_a_request_holds_is_sent_in_requests_of_that_size():
    rows = [{"query": "q", "document": str(i)} for i in range(5)]
    assert requests_of(rows, None, 2) == [("q", None, [0, 1]), ("q", None, [2, 3]), ("q", None, [4])]


def test_an_instruction_that_is_not_a_string_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"query": "q", "document": "d"}\n{"query": "q", "document": "d", "instruction": 3}\n')
    with pytest.raises(ValueError, match=r"pairs.jsonl:2: 'instruction' must be a string"):
        read_pair_rows(path)


def test_the_days_first_fit_is_its_first_version_and_a_later_one_the_next():
    today = datetime.date(2026, 12, 6)
    assert next_version("2026-12-03-unfitted", today) == "2026-12-06.1"
    assert next_version("2026-12-05.4", today) == "2026-12-06.1"
    assert next_version("2026-12-06.1", today) == "2026-12-06.2"
    assert next_version("2026-12-06.9", today) == "2026-12-06.10"
    assert next_version("2026-12-06-unfitted", today) == "2026-12-06.1"


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the model repository with variant tiny-bert of a checkpoint folder of another name."""
    root = tmp_path_factory.mktemp("fit")
    copy_repository(root / "model_repository")
    model = root / "tiny-bert-ce"
    shutil.copytree(session_models(tmp_path_factory)["bert"], model)
    assert main(["--repository", str(root / "model_repository"), "add", "tiny-bert", str(model)]) == 0
    return root / "model_repository"


def test_fit_refuses_a_variant_that_is_not_there_and_says_which_command_writes_it(capsys, repository, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "document": "d", "label": 1}) + "\n")
    assert main(["--repository", str(repository), "fit", "my-bert", str(pairs)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "configs/my-bert.pbtxt: no variant 'my-bert' (reranker-model add my-bert MODEL writes it)")


def test_fit_refuses_pairs_without_labels_before_the_engine_starts(capsys, repository, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "document": "d"}) + "\n")
    assert main(["--repository", str(repository), "fit", "tiny-bert", str(pairs)]) == 2
    assert capsys.readouterr().err.strip() == f"reranker-model fit: refused: {pairs}:1: 'label' must be 0 or 1"


def test_fit_refuses_a_variant_whose_profile_is_gone(capsys, repository, tmp_path):
    profile = repository / "rerank_calibrate" / "profiles" / "tiny-bert-ce.json"
    kept = profile.read_bytes()
    profile.unlink()
    try:
        pairs = tmp_path / "pairs.jsonl"
        pairs.write_text(json.dumps({"query": "q", "document": "d", "label": 1}) + "\n")
        assert main(["--repository", str(repository), "fit", "tiny-bert", str(pairs)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"reranker-model fit: refused: {profile}: variant 'tiny-bert' names this profile and it is not there; "
            "`reranker-model add tiny-bert ... --force` writes a first one")
    finally:
        profile.write_bytes(kept)
