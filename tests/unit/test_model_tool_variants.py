"""reranker-model add: the three steps' configs of a variant written from one description, the committed GPU
variants reproduced by the commands below, and the sample-based choice of max_model_len."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from python_backends.calibrate.profile_schema import CalibrationProfileError, load_profile
from python_backends.calibrate.step import bound_profile
from python_backends.contract import RequestLimits
from python_backends.model_repository import (
    ENGINE, PREPROCESS, STEPS, VariantModel, config_dict, read_config, variant_file,
)
from python_backends.model_source import checkpoint_identity
from reranker_model.cli import main
from tests.support.tiny_models import session_models

ROOT = Path(__file__).resolve().parents[2]
# The commands that write the committed GPU variants; add reads the checkpoints' config.json, tokenizer and weights' headers.
COMMITTED = {
    "gpu": ["Qwen/Qwen3-Reranker-0.6B", "--gpu", "--max-model-len", "8192"],
    "gpu-fp8": ["Qwen/Qwen3-Reranker-0.6B", "--gpu", "--max-model-len", "8192", "--quantization", "fp8"],
    "gpu-deterministic": ["Qwen/Qwen3-Reranker-0.6B", "--gpu", "--max-model-len", "8192", "--batch-invariant"],
    "gpu-bge-m3": ["BAAI/bge-reranker-v2-m3", "--gpu", "--max-model-len", "8192"],
}
# Their limits, as their hub config.json and tokenizer_config.json state them: (max_position_embeddings, tokenizer's)
HUB_LIMITS = {"Qwen/Qwen3-Reranker-0.6B": ("qwen3", 40960, 131072), "BAAI/bge-reranker-v2-m3": ("xlmr", 8194, 8192)}


def served_limits(repository: Path, variant: str) -> RequestLimits:
    return RequestLimits.from_model_configs(*(config_dict(variant_file(repository, step, variant)) for step in (PREPROCESS, ENGINE)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return session_models(tmp_path_factory)


def hub_cache(root: Path, tiny: dict[str, Path]) -> Path:
    """A Hugging Face cache holding the two hub ids: the tiny checkpoint of their family with their limits."""
    for hub_id, (family, positions, tokenizer_limit) in HUB_LIMITS.items():
        repo = root / f"models--{hub_id.replace('/', '--')}"
        snapshot = repo / "snapshots" / ("0" * 40)
        shutil.copytree(tiny[family], snapshot)
        for name, key, value in (("config.json", "max_position_embeddings", positions),
                                 ("tokenizer_config.json", "model_max_length", tokenizer_limit)):
            data = json.loads((snapshot / name).read_text())
            (snapshot / name).write_text(json.dumps({**data, key: value}))
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
    return root


@pytest.fixture(scope="module")
def added(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository whose committed GPU variants were removed, then written by their add commands, all four
    in one process of their own (the hub cache's location is read when huggingface_hub is imported; each command
    imports vLLM, ~8 s)."""
    root = tmp_path_factory.mktemp("added")
    repository = shutil.copytree(ROOT / "model_repository", root / "repo")
    for variant in COMMITTED:
        for step in STEPS:
            (repository / step / "configs" / f"{variant}.pbtxt").unlink()
    env = dict(os.environ, HF_HUB_CACHE=str(hub_cache(root / "hub", tiny)), HF_HUB_OFFLINE="1")
    commands = [["--repository", str(repository), "add", variant, *args] for variant, args in COMMITTED.items()]
    every = "import json, sys; from reranker_model.cli import main; sys.exit(max(main(c) for c in json.loads(sys.argv[1])))"
    done = subprocess.run([sys.executable, "-c", every, json.dumps(commands)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return repository


@pytest.mark.parametrize("variant", sorted(COMMITTED))
def test_committed_gpu_variant_is_what_its_add_command_writes(added, variant):
    command = "# " + shlex.join(["reranker-model", "add", variant, *COMMITTED[variant]])
    for step in STEPS:
        committed = ROOT / "model_repository" / step / "configs" / f"{variant}.pbtxt"
        assert committed.read_text().splitlines()[0] == command, step  # the file says what writes it
        written = read_config(added / step / "configs" / f"{variant}.pbtxt")
        assert written == read_config(committed), step


def test_add_with_a_sample_picks_max_model_len_and_binds_a_first_unfitted_profile(capsys, tiny, tmp_path):
    repository = shutil.copytree(ROOT / "model_repository", tmp_path / "repo")
    sample = tmp_path / "sample.jsonl"
    sample.write_text("".join(json.dumps({"query": "what is the capital of france", "document": " ".join(
        ["paris is the capital city of france"] * n), "label": 1}) + "\n" for n in range(1, 21)))
    add = ["--repository", str(repository), "add", "tiny-bert", str(tiny["bert"]), "--documents", str(sample)]
    # sized beside a 32-word query (a quarter of the model's 128 positions; the sample's longest has 6 tokens): 32
    # query + 7n document + 3 special tokens for n = 1..20: 95% are covered by 168 (n = 19), over the model's 128
    # positions, so 128 it is, and n = 14..20 do not fit: 35% of the sample cut is refused, and nothing written
    assert main(add) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == ["queries: each document beside a 32-word query, longer than the sample's longest (6 "
                                "tokens): 1/4 of the model's limit or 64 words, whichever is less (--max-query-words "
                                "sets another)",
                                "sequence tokens: P50 112  P90 168  P95 175  P99 175  max 175",
                                "max_model_len from the sample: 128 (the model's limit)"]
    assert err.strip() == ("reranker-model add: refused: max_model_len 128: 7 of 20 sample documents (35.0%) cut, over "
                           "5%: --accept-truncation writes the variant anyway, --max-model-len sets a longer one")
    assert not variant_file(repository, STEPS[0], "tiny-bert").exists()
    assert main([*add, "--accept-truncation"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3:5] == ["max_model_len 128: 7 of 20 sample documents (35.0%) cut",
                          "the variant takes: queries of up to 124 tokens (a longer one is refused), and beside a "
                          "one-word query documents of up to 124 tokens whole (longer ones are cut)"]
    assert lines[5].startswith("weights: ") and lines[-1] == (
        "serve it: tritonserver --model-config-name=tiny-bert (scripts/start_server.sh --model-config-name=tiny-bert)")
    pre, engine, calibrate = (config_dict(variant_file(repository, step, "tiny-bert")) for step in STEPS)
    args = json.loads(engine["parameters"]["engine_args"]["string_value"])
    assert RequestLimits.from_model_configs(pre, engine).max_model_len == args["max_model_len"] == 128
    assert (args["model"], args["runner"]) == (str(tiny["bert"]), "pooling")
    for config in (pre, calibrate):  # the model is stated once: the other steps name the engine's file
        assert config["parameters"]["engine_config"]["string_value"] == "../rerank_engine/configs/tiny-bert.pbtxt"
    profile = bound_profile(repository / "rerank_calibrate" / engine["parameters"]["calibration_profile"]["string_value"],
                            str(tiny["bert"]), "logit")
    assert (profile.model, profile.method, profile.fitted_on["fitted"]) == (str(tiny["bert"]), "sigmoid", False)
    assert profile.name == "bert" and profile.version.endswith("-unfitted")  # the file's name: profiles/bert.json


@pytest.mark.parametrize("name,message", [
    ("gpu", "variant 'gpu' exists (rerank_preprocess/configs/gpu.pbtxt, rerank_engine/configs/gpu.pbtxt, "
            "rerank_calibrate/configs/gpu.pbtxt): --force replaces it"),
    ("default", "variant name 'default' is reserved (taken: default, rerank_calibrate, rerank_engine, "
                "rerank_preprocess, reranker)"),
    ("rerank_engine", "variant name 'rerank_engine' is reserved"),
    ("../gpu", "variant name '../gpu': use lower-case letters, digits, '-' and '_' (e.g. tiny-bert)"),
    ("Tiny Bert", "variant name 'Tiny Bert': use lower-case letters"),
    ("rerank", "variant name 'rerank' served beside {repository} would take the names rerank_calibrate, rerank_engine, "
               "rerank_preprocess, which its models have: pick another name"),
    ("my-bert_engine", "variant name 'my-bert_engine' ends like a step of ensemble 'my-bert' (_preprocess, _engine, "
                       "_calibrate): pick another name"),
])
def test_add_refuses_a_name_that_is_taken_reserved_or_not_plain_and_writes_nothing(capsys, tiny, tmp_path, name,
                                                                                     message):
    repository = shutil.copytree(ROOT / "model_repository", tmp_path / "repo")
    before = {path: path.read_bytes() for path in repository.rglob("*") if path.is_file()}
    assert main(["--repository", str(repository), "add", name, str(tiny["bert"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"reranker-model add: refused: {message.format(repository=repository)}"), err
    assert {path: path.read_bytes() for path in repository.rglob("*") if path.is_file()} == before


def test_add_with_force_replaces_a_variant_and_says_so(capsys, tiny, tmp_path):
    repository = shutil.copytree(ROOT / "model_repository", tmp_path / "repo")
    assert main(["--repository", str(repository), "add", "tiny-bert", str(tiny["bert"])]) == 0
    first = capsys.readouterr().out.splitlines()
    assert [line for line in first if line.startswith(("wrote", "replaced"))] == [
        *(f"wrote {step}/configs/tiny-bert.pbtxt" for step in STEPS), "wrote rerank_calibrate/profiles/bert.json"]
    assert main(["--repository", str(repository), "add", "tiny-bert", str(tiny["bert"]), "--max-model-len", "64"]) == 2
    assert main(["--repository", str(repository), "add", "tiny-bert", str(tiny["bert"]), "--max-model-len", "64",
                 "--force"]) == 0
    second = capsys.readouterr().out.splitlines()
    assert [line for line in second if line.startswith(("wrote", "replaced"))] == [
        f"replaced {step}/configs/tiny-bert.pbtxt" for step in STEPS]
    assert served_limits(repository, "tiny-bert").max_model_len == 64


def test_a_sample_of_documents_alone_is_sized_with_room_for_a_query_and_a_replaced_variant_keeps_its_length(
        capsys, tiny, tmp_path):
    """A migration sample of one document per line: the lengths count a query of 64 words, or a quarter of the
    model's positions where that is less, beside each document (a short query would be refused by the new variant
    where the old one took it); replacing a variant keeps its longer max_model_len unless --max-model-len says
    otherwise."""
    repository = shutil.copytree(ROOT / "model_repository", tmp_path / "repo")
    documents = tmp_path / "documents.txt"
    documents.write_text("".join(" ".join(["paris is the capital"] * n) + "\n" for n in range(1, 11)))  # 4n tokens
    add = ["--repository", str(repository), "add", "tiny-bert", str(tiny["bert"]), "--documents", str(documents)]
    assert main([*add, "--max-query-words", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # [CLS] 8 query [SEP] 4n [SEP]: 11 + 4n for n = 1..10, 95% covered by n = 10
    assert lines[:4] == ["queries: each document beside a 8-word query (--max-query-words)",
                         "sequence tokens: P50 35  P90 51  P95 51  P99 51  max 51",
                         "max_model_len from the sample: 51",
                         "max_model_len 51: 0 of 10 sample documents (0.0%) cut"]
    assert main([*add, "--force"]) == 0  # a 32-word query (128 positions / 4): 35 + 4n
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["queries: none in the sample (one document per line): each document beside a 32-word query "
                         "(--max-query-words sets another)",
                         "sequence tokens: P50 59  P90 75  P95 75  P99 75  max 75",
                         "max_model_len from the sample: 75",
                         "max_model_len 75: 0 of 10 sample documents (0.0%) cut"]
    assert main([*add, "--force", "--max-query-words", "8"]) == 0  # the sample alone asks for 51 of the 75 taken
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:5] == ["max_model_len from the sample: 51",
                          "max_model_len 75: what the variant it replaces accepted (--max-model-len sets a shorter one)",
                          "max_model_len 75: 0 of 10 sample documents (0.0%) cut"]
    assert main([*add, "--force", "--max-query-words", "8", "--max-model-len", "51"]) == 0
    assert served_limits(repository, "tiny-bert").max_model_len == 51


def test_a_profile_goes_with_its_checkpoint_not_its_folder_name(capsys, tiny, tmp_path):
    """Two checkpoints in folders of the same name (a fine-tune beside its base): each variant gets a profile bound to
    its own checkpoint, and the calibrate step refuses the other's."""
    repository = shutil.copytree(ROOT / "model_repository", tmp_path / "repo")
    base, tuned = shutil.copytree(tiny["bert"], tmp_path / "a" / "bert"), shutil.copytree(tiny["bert"], tmp_path / "b" / "bert")
    weights = tuned / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4:] = bytes(255 - b for b in data[-4:])  # other weights, same config and tensor shapes
    weights.write_bytes(bytes(data))
    assert checkpoint_identity(base) != checkpoint_identity(tuned)
    for name, model in (("base", base), ("tuned", tuned)):
        assert main(["--repository", str(repository), "add", name, str(model)]) == 0
    written = [line for line in capsys.readouterr().out.splitlines() if "profiles/" in line]
    tuned_profile = f"profiles/bert-{checkpoint_identity(tuned).removeprefix('sha256:')[:8]}.json"
    assert written == ["wrote rerank_calibrate/profiles/bert.json", f"wrote rerank_calibrate/{tuned_profile}"]
    profiles = {name: load_profile(repository / "rerank_calibrate" / VariantModel.for_step(
        repository / "rerank_calibrate", config_dict(variant_file(repository, "rerank_calibrate", name))).calibration_profile)
        for name in ("base", "tuned")}
    assert {name: profile.checkpoint for name, profile in profiles.items()} == {
        "base": checkpoint_identity(base), "tuned": checkpoint_identity(tuned)}
    base_profile = repository / "rerank_calibrate" / "profiles" / "bert.json"
    with pytest.raises(CalibrationProfileError) as caught:
        bound_profile(base_profile, str(tuned), "logit", checkpoint_identity(tuned))
    assert str(caught.value) == (
        f"{base_profile}: profile bert@{profiles['base'].version} was made for checkpoint "
        f"{checkpoint_identity(base)} (model '{base}'), but the served model '{tuned}' is checkpoint "
        f"{checkpoint_identity(tuned)}; fit a profile for this model (reranker-calibrate fit) or point "
        "calibration_profile at its own")
