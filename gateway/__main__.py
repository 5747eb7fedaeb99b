"""`python -m gateway`: serve the gateway with uvicorn on GATEWAY_HOST:GATEWAY_PORT (default 127.0.0.1:8080),
talking to Triton at TRITON_GRPC_URL (default localhost:8001)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .settings import ENVIRONMENT, Settings, default_of

if TYPE_CHECKING:  # imported when serving: `--help` stays quick
    from fastapi import FastAPI


def help_text() -> str:
    """The environment variables, their defaults and meanings."""
    rows = [(name, default_of(setting) or "-", meaning) for name, setting, meaning in ENVIRONMENT]
    width = max(len(name) for name, _, _ in rows)
    return "settings, from the environment (default, meaning):\n" + "\n".join(
        f"  {name:<{width}}  {default}: {meaning}" for name, default, meaning in rows)


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(prog="reranker-gateway", description=__doc__.split("\n\n")[0].replace("\n", " "),
                            epilog=help_text(), formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    import uvicorn

    from .app import create_app

    try:
        app = create_app(Settings.from_env())
    except ValueError as exc:  # a setting, or a profile file, the gateway cannot start with: one line naming it
        raise SystemExit(f"reranker-gateway: {exc}") from None
    uvicorn.run(app, **server_options(app))


def server_options(app: FastAPI) -> dict[str, Any]:
    """uvicorn's options for `app` (from `create_app`): its settings' address, the head bounded (gateway.head), 30 s
    for the calls in flight at a stop."""
    from .calls import HEAD_PATH
    from .head import h11_event_limit, protocol

    settings: Settings = app.state.settings

    def refused(status: int) -> None:
        app.state.calls.labels(path=HEAD_PATH, status=str(status)).inc()

    # The plain asyncio loop: grpc.aio runs on it; uvloop is not needed for a thin proxy.
    return {"host": settings.host, "port": settings.port, "loop": "asyncio", "log_level": settings.log_level,
            "timeout_graceful_shutdown": 30, "http": protocol(settings, refused),
            "h11_max_incomplete_event_size": h11_event_limit(settings)}


if __name__ == "__main__":
    main()
