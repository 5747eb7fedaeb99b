"""reranker-model ensemble: the second repository a variant is served from beside `reranker`."""

from __future__ import annotations

from python_backends.model_repository import ENGINE, STEPS, read_config
from reranker_model.beside import SecondEnsemble, step_name
from reranker_model.cli import main
from tests.support.triton_server import ROOT

REPOSITORY = ROOT / "model_repository"


def test_the_default_config_beside_as_minilm(tmp_path, capsys):
    assert main(["ensemble", "default", str(tmp_path), "--as", "minilm"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "ensemble minilm: minilm_preprocess -> minilm_engine -> minilm_calibrate"
    ensemble = read_config(tmp_path / "minilm" / "config.pbtxt")
    original = read_config(REPOSITORY / "reranker" / "config.pbtxt")
    assert ensemble.name == "minilm"
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == [step_name("minilm", s) for s in STEPS]
    ensemble.name = original.name
    for step, copied in zip(original.ensemble_scheduling.step, ensemble.ensemble_scheduling.step):
        copied.model_name = step.model_name
    assert ensemble == original  # nothing else changed
    assert (tmp_path / "minilm" / "1").is_dir()
    for step in STEPS:
        folder = tmp_path / step_name("minilm", step)
        config, base = read_config(folder / "config.pbtxt"), read_config(REPOSITORY / step / "config.pbtxt")
        assert config.name == step_name("minilm", step)
        config.name = base.name
        if step != ENGINE:  # each names the engine beside it
            assert config.parameters["engine_config"].string_value == "../minilm_engine/config.pbtxt"
            config.parameters["engine_config"].string_value = base.parameters["engine_config"].string_value
        assert config == base
        assert (folder / "1" / "model.py").read_bytes() == (REPOSITORY / step / "1" / "model.py").read_bytes()
    profile = "profiles/all-minilm-l6-v2.json"
    assert (tmp_path / "minilm_calibrate" / profile).read_bytes() == (REPOSITORY / "rerank_calibrate" / profile).read_bytes()


def test_a_committed_gpu_variant_beside_keeps_its_settings(tmp_path):
    SecondEnsemble(REPOSITORY, "gpu", tmp_path, "qwen3").write()
    config = read_config(tmp_path / "qwen3_engine" / "config.pbtxt")
    base = read_config(REPOSITORY / "rerank_engine" / "configs" / "gpu.pbtxt")
    config.name = base.name
    assert config == base


def test_an_unknown_variant_is_refused(tmp_path, capsys):
    assert main(["ensemble", "nope", str(tmp_path)]) == 2
    assert "no variant 'nope' (reranker-model add nope MODEL writes it)" in capsys.readouterr().err


def test_an_ensemble_name_that_would_clash_is_refused_and_writes_nothing(tmp_path, capsys):
    """`--as rerank` would be served as rerank_preprocess, ... beside the repository's own steps; a name ending like a
    step would overwrite that step of another ensemble in the same folder."""
    for name, says in (("rerank", f"ensemble name 'rerank' served beside {REPOSITORY} would take the names "
                                  "rerank_calibrate, rerank_engine, rerank_preprocess, which its models have: choose "
                                  "another with --as"),
                       ("tiny_engine", "ensemble name 'tiny_engine' ends like a step of ensemble 'tiny' (_preprocess, "
                                       "_engine, _calibrate): choose another with --as")):
        assert main(["ensemble", "default", str(tmp_path / "out"), "--as", name]) == 2
        assert capsys.readouterr().err.strip() == f"reranker-model ensemble: refused: {says}"
    assert not (tmp_path / "out").exists()
