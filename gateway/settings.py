"""The gateway's settings, read from the environment (the names docker-compose.yml and the image set)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    triton_grpc_url: str = "localhost:8001"  # TRITON_GRPC_URL
    # RERANK_MODEL: the Triton model (ensemble) that answers; also the default of the body's optional `model`
    triton_model: str = "reranker"
    model_aliases: tuple[str, ...] = ()  # GATEWAY_MODEL_ALIASES: more names accepted in the body's `model`
    host: str = "127.0.0.1"  # GATEWAY_HOST (the image sets 0.0.0.0)
    port: int = 8080  # GATEWAY_PORT
    # GATEWAY_MAX_DOCUMENTS: per call, a gateway policy; the call is split into requests of the server's own
    # max_documents, which the client reads from the server's configuration
    max_documents: int = 10_000
    max_concurrency: int = 4  # GATEWAY_MAX_CONCURRENCY: Triton requests of one call in flight at once
    max_retries: int = 3  # GATEWAY_MAX_RETRIES: retries of an UNAVAILABLE answer
    backoff_s: float = 0.1  # GATEWAY_BACKOFF_S: first retry's wait, doubled each time (max 2 s)
    timeout_s: float = 60.0  # GATEWAY_TIMEOUT_S: per Triton request
    # GATEWAY_MAX_BODY_BYTES: a larger body is refused with 413 before it is read whole (a gateway policy: the
    # server's per-document and per-query byte limits are checked on the parsed body)
    max_body_bytes: int = 32 * 1024 * 1024
    body_timeout_s: float = 30.0  # GATEWAY_BODY_TIMEOUT_S: the whole body must arrive within this, else 408
    # GATEWAY_API_KEY, or the content of the file GATEWAY_API_KEY_FILE (a mounted secret): when set, every
    # API call needs `Authorization: Bearer <key>`; the health probes and the OpenAPI spec stay open
    api_key: str | None = field(default=None, repr=False)
    health_timeout_s: float = 2.0  # GATEWAY_HEALTH_TIMEOUT_S: /health answers 503 when Triton is slower
    log_level: str = "info"  # GATEWAY_LOG_LEVEL

    @property
    def models(self) -> tuple[str, ...]:
        """Names the body's `model` may take."""
        return (self.triton_model, *(a for a in self.model_aliases if a != self.triton_model))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def get(name: str, default: object, kind: type = str) -> object:
            value = env.get(name, "").strip()
            if not value:
                return default
            try:
                return kind(value)
            except ValueError:
                raise ValueError(f"{name}={value!r} is not a valid {kind.__name__}") from None

        defaults = cls()
        aliases = tuple(a.strip() for a in env.get("GATEWAY_MODEL_ALIASES", "").split(",") if a.strip())
        key_file = env.get("GATEWAY_API_KEY_FILE", "").strip()
        api_key = Path(key_file).read_text() if key_file else env.get("GATEWAY_API_KEY", "")
        return cls(
            triton_grpc_url=get("TRITON_GRPC_URL", defaults.triton_grpc_url),
            triton_model=get("RERANK_MODEL", defaults.triton_model),
            model_aliases=aliases,
            host=get("GATEWAY_HOST", defaults.host),
            port=get("GATEWAY_PORT", defaults.port, int),
            max_documents=get("GATEWAY_MAX_DOCUMENTS", defaults.max_documents, int),
            max_concurrency=get("GATEWAY_MAX_CONCURRENCY", defaults.max_concurrency, int),
            max_retries=get("GATEWAY_MAX_RETRIES", defaults.max_retries, int),
            backoff_s=get("GATEWAY_BACKOFF_S", defaults.backoff_s, float),
            timeout_s=get("GATEWAY_TIMEOUT_S", defaults.timeout_s, float),
            max_body_bytes=get("GATEWAY_MAX_BODY_BYTES", defaults.max_body_bytes, int),
            body_timeout_s=get("GATEWAY_BODY_TIMEOUT_S", defaults.body_timeout_s, float),
            api_key=api_key.strip() or None,
            health_timeout_s=get("GATEWAY_HEALTH_TIMEOUT_S", defaults.health_timeout_s, float),
            log_level=get("GATEWAY_LOG_LEVEL", defaults.log_level),
        )
