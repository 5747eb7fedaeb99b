"""What `reranker-model check` finds in a checkpoint: its family, score type, limits, template and engine arguments,
or the reason it cannot be served and what to do about it.

Everything family-specific comes from python_backends.families (detection, encoder, engine_args, score type); this
module only reads the checkpoint's files and asks the families about them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from python_backends.families import ModelFamily, Qwen3YesNo, UnsupportedModelError, detect_model, make_encoder
from python_backends.model_source import PACKAGE_PREFIX, ModelSourceError, checkpoint_identity, local_checkpoint

from .weights import BrokenWeights, Weights, checked_weights

PROBE_QUERY, PROBE_DOCUMENT = "query", "document"  # shown through the family's template as the prompt it builds


class RefusedModel(ValueError):
    """A checkpoint this repository cannot serve; the message says why and what to do."""


@dataclass(frozen=True)
class ModelCheck:
    reference: str  # as given: what the configs name
    path: str  # the local folder it resolved to
    family: type[ModelFamily]
    architecture: str
    model_type: str
    max_position_embeddings: int | None
    length_limit: int  # the longest sequence the model and its tokenizer take
    template: str  # the probe pair as the model sees it (the family's template, decoded)
    classifier_tokens: dict[str, int]  # a yes/no reranker's answer tokens and their ids ({} otherwise)
    weights: Weights  # the safetensors files, checked

    @property
    def score_type(self) -> str:
        return self.family.score_type

    @property
    def engine_args(self) -> dict[str, Any]:
        return dict(self.family.engine_args)

    @property
    def loaded_architecture(self) -> str:
        """The architecture vLLM instantiates: the family's hf_overrides may turn a causal LM into a classifier."""
        return self.engine_args.get("hf_overrides", {}).get("architectures", [self.architecture])[0]

    @cached_property
    def identity(self) -> str:
        """What its calibration profile is bound to (python_backends.model_source.checkpoint_identity)."""
        return checkpoint_identity(Path(self.path))

    @property
    def profile_stem(self) -> str:
        """The calibration profile's file name stem: the hub id's name, the folder's, or the package's."""
        if self.reference.startswith(PACKAGE_PREFIX):
            return self.reference[len(PACKAGE_PREFIX):].partition("/")[0].lower()
        return Path(self.reference.rstrip("/")).name.lower()


def local_folder(reference: str) -> str:
    """A folder, `package:<module>/<dir>`, or a hub id already in the local Hugging Face cache (nothing downloads)."""
    try:
        folder = local_checkpoint(reference)
    except ModelSourceError as exc:
        raise RefusedModel(f"{exc}: give a folder with config.json, package:<module>/<dir>, or a cached hub id") from None
    if folder is None:
        raise RefusedModel(
            f"model '{reference}': not a folder and not in the local Hugging Face cache; download it first "
            f"(huggingface-cli download {reference}) or give its folder"
        )
    return str(folder)


def _config_json(folder: str) -> dict[str, Any]:
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as problem:
        raise RefusedModel(f"{path}: not valid JSON ({problem})") from None
    if not isinstance(config, dict):
        raise RefusedModel(f"{path}: not a JSON object")
    if config.get("auto_map"):
        raise RefusedModel(
            f"{folder}: config.json has auto_map ({', '.join(sorted(config['auto_map']))}): the model needs its own "
            "Python code (trust_remote_code), which this repository never runs; use a checkpoint with a built-in "
            "transformers architecture"
        )
    return config


def _sentence_transformers_limit(folder: str) -> int | None:
    """`max_seq_length` of a sentence-transformers checkpoint, which vLLM also takes as a limit on max_model_len."""
    path = Path(folder) / "sentence_bert_config.json"
    return json.loads(path.read_text()).get("max_seq_length") if path.is_file() else None


def _tokenizer(folder: str) -> Any:
    from transformers import AutoTokenizer

    if not (Path(folder) / "tokenizer.json").is_file():  # without it transformers may build an empty tokenizer
        raise RefusedModel(f"{folder}: no tokenizer.json; the serving code needs the model's fast tokenizer: save one "
                           "with AutoTokenizer.from_pretrained(...).save_pretrained(folder)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # noqa: BLE001 - any failure here means there is no usable tokenizer
        raise RefusedModel(f"{folder}: no tokenizer could be loaded ({type(exc).__name__}); the checkpoint needs "
                           "tokenizer.json (a fast tokenizer) beside config.json") from None
    return tokenizer


def _family(folder: str, config: dict[str, Any]) -> Any:
    try:
        return detect_model(folder)
    except UnsupportedModelError as exc:
        architecture = (config.get("architectures") or [""])[0]
        if architecture in Qwen3YesNo.ARCHITECTURES:  # the family's own reason: its model card or its answer tokens
            raise RefusedModel(str(exc)) from None
        if architecture.endswith("ForCausalLM"):
            raise RefusedModel(
                f"{folder}: {architecture} is a causal LM; one is served only as a yes/no reranker (Qwen3ForCausalLM, "
                "e.g. Qwen/Qwen3-Reranker-0.6B), scored by vLLM from its 'yes' and 'no' logits"
            ) from None
        raise RefusedModel(f"{exc}; a new family is a module in python_backends/families") from None


def _classifier_tokens(family: type[ModelFamily], tokenizer: Any) -> dict[str, int]:
    """A yes/no reranker's answer tokens and their ids (detection has made sure the tokenizer has them)."""
    tokens = family.engine_args.get("hf_overrides", {}).get("classifier_from_token", [])
    return {token: tokenizer.convert_tokens_to_ids(token) for token in tokens}


def check_model(reference: str) -> ModelCheck:
    """Everything `check` says about `reference`; raises RefusedModel with the reason and what to do."""
    folder = local_folder(reference)
    config = _config_json(folder)
    try:
        weights = checked_weights(folder, config)
    except BrokenWeights as problem:
        raise RefusedModel(str(problem)) from None
    tokenizer = _tokenizer(folder)
    info = _family(folder, config)
    model_max = tokenizer.model_max_length if tokenizer.model_max_length < 10**7 else None  # 1e30 when unset
    limits = [n for n in (info.max_position_embeddings, model_max, _sentence_transformers_limit(folder)) if n]
    if not limits:
        raise RefusedModel(f"{folder}: neither config.json, the tokenizer nor sentence_bert_config.json states a "
                           "maximum length")
    limit = min(limits)
    encoded = make_encoder(info.family, folder, limit).encode(PROBE_QUERY, [PROBE_DOCUMENT], None)
    return ModelCheck(
        reference=reference,
        path=folder,
        family=info.family,
        architecture=info.architecture,
        model_type=info.model_type,
        max_position_embeddings=info.max_position_embeddings,
        length_limit=limit,
        template=" | ".join(tokenizer.decode(ids, skip_special_tokens=False) for ids in encoded.token_ids),
        classifier_tokens=_classifier_tokens(info.family, tokenizer),
        weights=weights,
    )


@lru_cache(maxsize=1)
def _registry() -> tuple[str, frozenset[str]]:
    import vllm
    from vllm.model_executor.models import ModelRegistry

    return vllm.__version__, frozenset(ModelRegistry.get_supported_archs())


def vllm_support(architecture: str) -> tuple[str, str | None]:
    """The installed vLLM's version, and the registry entry it loads `architecture` from under runner "pooling"
    (itself, or the model it converts, as Qwen3ForSequenceClassification from Qwen3ForCausalLM); None: not supported.
    Imports vLLM (~15 s)."""
    from vllm.config.model import iter_architecture_defaults, try_match_architecture_defaults

    version, known = _registry()
    if architecture in known:
        return version, architecture
    match = try_match_architecture_defaults(architecture, runner_type="pooling")
    if match:
        for suffix, _ in iter_architecture_defaults():
            base = architecture.replace(match[0], suffix)
            if base in known:
                return version, base
    return version, None
