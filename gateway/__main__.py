"""`python -m gateway`: serve the gateway with uvicorn on GATEWAY_HOST:GATEWAY_PORT (default 127.0.0.1:8080),
talking to Triton at TRITON_GRPC_URL (default localhost:8001)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .settings import ENVIRONMENT, Settings, default_of


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

    settings = Settings.from_env()
    # The plain asyncio loop: grpc.aio runs on it; uvloop is not needed for a thin proxy.
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        loop="asyncio",
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
    )


if __name__ == "__main__":
    main()
