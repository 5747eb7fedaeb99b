"""The gateway's settings, read from the environment (the names docker-compose.yml and the image set): ENVIRONMENT
names each variable's setting once, and pydantic converts and checks the values."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, TypeAdapter, ValidationError

from python_backends.calibrate.profile_schema import CalibrationProfileError, load_profile

from .bodies import VALUE_BYTES


def _names(value: Any) -> Any:
    """A comma-separated list of names, as the environment spells it ("a, b,,c" -> ("a", "b", "c"))."""
    return tuple(name.strip() for name in value.split(",") if name.strip()) if isinstance(value, str) else value


Names = Annotated[tuple[str, ...], BeforeValidator(_names)]


@dataclass(frozen=True)
class Settings:
    triton_grpc_url: str = "localhost:8001"  # TRITON_GRPC_URL
    # RERANK_MODEL: the Triton model (ensemble) that answers; also the default of the body's optional `model`
    triton_model: str = "reranker"
    model_aliases: Names = ()  # GATEWAY_MODEL_ALIASES: more names accepted in the body's `model`
    host: str = "127.0.0.1"  # GATEWAY_HOST (the image sets 0.0.0.0)
    port: int = 8080  # GATEWAY_PORT
    # GATEWAY_MAX_DOCUMENTS: per call, a gateway policy; the call is split into requests of the server's own
    # max_documents, which the client reads from the server's configuration
    max_documents: int = 10_000
    max_concurrency: int = 4  # GATEWAY_MAX_CONCURRENCY: Triton requests of one call in flight at once
    max_retries: int = 3  # GATEWAY_MAX_RETRIES: retries of an UNAVAILABLE answer
    backoff_s: float = 0.1  # GATEWAY_BACKOFF_S: first retry's wait, doubled each time (max 2 s)
    timeout_s: float = 60.0  # GATEWAY_TIMEOUT_S: per Triton request, and for all the requests of one /score call
    # GATEWAY_MAX_BODY_BYTES: a larger body is refused with 413 before it is read whole (a gateway policy: the
    # server's per-document and per-query byte limits are checked on the parsed body)
    max_body_bytes: int = 32 * 1024 * 1024
    body_timeout_s: float = 30.0  # GATEWAY_BODY_TIMEOUT_S: the whole body must arrive within this, else 408
    # GATEWAY_MAX_INFLIGHT_BODY_BYTES: the weight of the request bodies held at once (their bytes, and each JSON value
    # as gateway.bodies.VALUE_BYTES more), taken as they arrive (a declared length reserves nothing) and held until the
    # answer; a call whose body would go past it is refused with 503 and Retry-After, the rest of its body read off
    # the connection and dropped, never parsed, and one that weighs more than all of it with 413. At least
    # max_body_bytes. 66 MiB: two bodies at max_body_bytes holding max_documents objects of up to three fields each
    # (7 values a document: 2 x (32 MiB + 70000 x VALUE_BYTES) = 68.5 MB).
    max_inflight_body_bytes: int = 66 * 1024 * 1024
    # GATEWAY_MAX_HEADER_BYTES and GATEWAY_HEADER_TIMEOUT_S: the request line and headers, bounded below the app
    # (gateway.head): 16 KiB is what h11 and Node take by default, 10 s keeps a slow client's connection short
    max_header_bytes: int = 16 * 1024
    header_timeout_s: float = 10.0
    # GATEWAY_API_KEY, or the content of the file GATEWAY_API_KEY_FILE (a mounted secret): when set, every
    # API call needs `Authorization: Bearer <key>`; the health probes and the OpenAPI spec stay open
    api_key: str | None = field(default=None, repr=False)
    # GATEWAY_HEALTH_TIMEOUT_S (ENVIRONMENT below). Its probe pair waits half of it, and Triton 2.51 answers a request
    # to a dead engine stub after its 1 s stub health wait: at 2 s the probe gave up just before that answer and
    # /health stayed 200 with the engine dead.
    health_timeout_s: float = 4.0
    engine_watch_s: float = 5.0  # GATEWAY_ENGINE_WATCH_S (ENVIRONMENT below)
    log_level: str = "info"  # GATEWAY_LOG_LEVEL
    # GATEWAY_MODELS: more Triton ensembles served by their own name in the body's `model` (each its own client
    # and limits), e.g. a second model next to `reranker` (`reranker-model ensemble`)
    other_models: Names = ()
    shadow: ShadowSettings | None = None  # GATEWAY_SHADOW_*: a candidate model compared off the request path
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (OpenTelemetry's own name): a span per call and per Triton request, the
    # context passed on to Triton (gateway.tracing), exported there by OTLP/HTTP
    traces_endpoint: str | None = None

    def __post_init__(self) -> None:
        if self.max_inflight_body_bytes < self.max_body_bytes:
            raise ValueError(f"GATEWAY_MAX_INFLIGHT_BODY_BYTES={self.max_inflight_body_bytes} is less than "
                             f"GATEWAY_MAX_BODY_BYTES={self.max_body_bytes}: a body at the limit could never be taken")

    @property
    def models(self) -> tuple[str, ...]:
        """Names the body's `model` may take: the default, its aliases, the other ensembles."""
        names = (self.triton_model, *self.model_aliases, *self.other_models)
        return tuple(dict.fromkeys(names))

    def triton_name(self, model: str) -> str:
        """The ensemble that answers a served name: an alias is the default model."""
        return model if model in self.other_models else self.triton_model

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings the variables of ENVIRONMENT give (an empty one leaves its default); pydantic converts and
        checks them, and a value it refuses names its variable."""
        env = os.environ if env is None else env
        raw: dict[str, Any] = {}
        for variable, setting, _ in ENVIRONMENT:
            value = (env.get(variable) or "").strip()
            if value and setting:
                owner, _, name = setting.rpartition(".")
                (raw.setdefault(owner, {}) if owner else raw)[name] = value
        key_file = (env.get("GATEWAY_API_KEY_FILE") or "").strip()
        if key_file:
            raw["api_key"] = Path(key_file).read_text().strip() or None
        if "model" not in raw.get("shadow", {}):  # the candidate's settings count only with a candidate
            raw.pop("shadow", None)
        try:
            return TypeAdapter(cls).validate_python(raw)
        except ValidationError as problem:
            raise _named(problem) from None


@dataclass(frozen=True)
class ShadowSettings:
    """A candidate model that gets a fraction of the default model's calls after they are answered."""

    model: str  # GATEWAY_SHADOW_MODEL: the candidate's Triton ensemble
    fraction: float = 0.1  # GATEWAY_SHADOW_FRACTION: share of the default model's answered calls sent to it
    # GATEWAY_SHADOW_TRITON_GRPC_URL: where the candidate is served; default TRITON_GRPC_URL (a candidate on its own
    # server takes no capacity from the primary)
    triton_grpc_url: str | None = None
    queue_size: int = 64  # GATEWAY_SHADOW_QUEUE: calls waiting for the candidate; one more is dropped and counted
    concurrency: int = 2  # GATEWAY_SHADOW_CONCURRENCY: candidate calls in flight at once
    timeout_s: float = 10.0  # GATEWAY_SHADOW_TIMEOUT_S: a slower candidate call counts as failed
    top_k: int = 10  # GATEWAY_SHADOW_TOP_K: the k of the top-k overlap
    # GATEWAY_SHADOW_PROFILE: the candidate's calibration profile (JSON); with a raw_score_distribution, the PSI of
    # the candidate's last GATEWAY_SHADOW_DRIFT_WINDOW raw scores against it is exported
    profile: Path | None = None
    drift_window: int = 1000

    def __post_init__(self) -> None:
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"GATEWAY_SHADOW_FRACTION={self.fraction} is not in [0, 1]")
        for name, value in (("QUEUE", self.queue_size), ("CONCURRENCY", self.concurrency),
                            ("TOP_K", self.top_k), ("DRIFT_WINDOW", self.drift_window)):
            if value < 1:
                raise ValueError(f"GATEWAY_SHADOW_{name}={value} must be at least 1")
        if self.profile is not None:
            if not self.profile.is_file():
                raise ValueError(f"GATEWAY_SHADOW_PROFILE={self.profile} is not a file (a second ensemble's profile "
                                 "is DIR/NAME_calibrate/profiles/<its file>, which `reranker-model ensemble NAME DIR` "
                                 "prints)")
            try:
                load_profile(self.profile)  # read again at start; a broken one refused here, with the setting named
            except CalibrationProfileError as exc:
                raise ValueError(f"GATEWAY_SHADOW_PROFILE: {exc}") from None


# Every environment variable the gateway reads, with the setting it fills (None: none of its own) and what it means:
# `reranker-gateway --help` prints them with their defaults, and tests/gateway/test_gateway_cli.py checks that
# `from_env` reads exactly these and that docs/USAGE.md's settings table lists each.
ENVIRONMENT: tuple[tuple[str, str | None, str], ...] = (
    ("TRITON_GRPC_URL", "triton_grpc_url", "Triton's gRPC address"),
    ("RERANK_MODEL", "triton_model", "the Triton ensemble that answers, and the default `model`"),
    ("GATEWAY_MODEL_ALIASES", "model_aliases", "more names accepted in `model` for it, comma-separated"),
    ("GATEWAY_MODELS", "other_models", "more ensembles served by their own name in `model`, comma-separated"),
    ("GATEWAY_HOST", "host", "the address it listens on"),
    ("GATEWAY_PORT", "port", "the port it listens on"),
    ("GATEWAY_API_KEY", "api_key", "when set, every API call needs `Authorization: Bearer <key>`"),
    ("GATEWAY_API_KEY_FILE", None, "a file holding the key (a mounted secret); wins over GATEWAY_API_KEY"),
    ("GATEWAY_MAX_BODY_BYTES", "max_body_bytes", "a larger body is refused with 413 before it is read whole"),
    ("GATEWAY_BODY_TIMEOUT_S", "body_timeout_s", "the whole body must arrive within this, else 408"),
    ("GATEWAY_MAX_INFLIGHT_BODY_BYTES", "max_inflight_body_bytes", "bytes of bodies held at once, each JSON "
     f"value counted as {VALUE_BYTES} more; past it, 503 (413 for a body heavier than all of it)"),
    ("GATEWAY_MAX_HEADER_BYTES", "max_header_bytes", "a longer request line and headers are refused with 431"),
    ("GATEWAY_HEADER_TIMEOUT_S", "header_timeout_s", "a request's line and headers must arrive within this from the "
     "connection's opening or its last answer, else 408 (closed without an answer when nothing came)"),
    ("GATEWAY_MAX_DOCUMENTS", "max_documents", "documents per call; split into requests of the server's own"),
    ("GATEWAY_MAX_CONCURRENCY", "max_concurrency", "Triton requests of one call in flight at once"),
    ("GATEWAY_MAX_RETRIES", "max_retries", "retries of a busy or unavailable server"),
    ("GATEWAY_BACKOFF_S", "backoff_s", "the first retry's wait, doubled each time (max 2 s)"),
    ("GATEWAY_TIMEOUT_S", "timeout_s", "per Triton request, and for all of one /score call (504 past it)"),
    ("GATEWAY_HEALTH_TIMEOUT_S", "health_timeout_s", "/health answers 503 when Triton is slower; its probe pair "
     "unanswered after half of it counts as busy, not down"),
    ("GATEWAY_ENGINE_WATCH_S", "engine_watch_s", "a call unanswered this long sends the probe pair to its ensemble; "
     "a dead engine's error there ends every call waiting on it (503)"),
    ("GATEWAY_LOG_LEVEL", "log_level", "uvicorn's log level"),
    ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "traces_endpoint", "an OTLP/HTTP traces URL: a trace per call, passed on "
     "to Triton"),
    ("GATEWAY_SHADOW_MODEL", "shadow.model", "a candidate ensemble sent a share of the default model's calls (one "
     "its Triton does not serve stops the start)"),
    ("GATEWAY_SHADOW_FRACTION", "shadow.fraction", "the share of answered calls the candidate gets"),
    ("GATEWAY_SHADOW_TRITON_GRPC_URL", "shadow.triton_grpc_url", "where the candidate is served (default: Triton's)"),
    ("GATEWAY_SHADOW_QUEUE", "shadow.queue_size", "candidate calls waiting; one more is dropped and counted"),
    ("GATEWAY_SHADOW_CONCURRENCY", "shadow.concurrency", "candidate calls in flight at once"),
    ("GATEWAY_SHADOW_TIMEOUT_S", "shadow.timeout_s", "a slower candidate call counts as failed"),
    ("GATEWAY_SHADOW_TOP_K", "shadow.top_k", "the k of the top-k overlap"),
    ("GATEWAY_SHADOW_PROFILE", "shadow.profile", "the candidate's calibration profile, for its drift PSI"),
    ("GATEWAY_SHADOW_DRIFT_WINDOW", "shadow.drift_window", "the candidate's raw scores the PSI is taken over"),
)


VARIABLES = {setting: variable for variable, setting, _ in ENVIRONMENT if setting}


def _named(problem: ValidationError) -> ValueError:
    """The first problem pydantic found, as the variable that holds it: a value it could not convert, or the
    settings' own check (__post_init__), whose message already names the variables."""
    error = problem.errors()[0]
    if error["type"] == "value_error":
        return ValueError(str(error["ctx"]["error"]))
    variable = VARIABLES[".".join(str(part) for part in error["loc"])]
    return ValueError(f"{variable}={error['input']!r}: {error['msg']}")


def default_of(setting: str | None) -> str:
    """A setting's default as the environment would spell it ("" for none)."""
    if setting is None:
        return ""
    owner, _, name = setting.rpartition(".")
    value = getattr(ShadowSettings("") if owner else Settings(), name)
    if isinstance(value, tuple):
        return ",".join(value)
    return "" if value is None or value == "" else str(value)
