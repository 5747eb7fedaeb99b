"""`python -m gateway`: serve the gateway with uvicorn on GATEWAY_HOST:GATEWAY_PORT (default 127.0.0.1:8080),
talking to Triton at TRITON_GRPC_URL (default localhost:8001)."""

from __future__ import annotations

import uvicorn

from .app import create_app
from .settings import Settings


def main() -> None:
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
