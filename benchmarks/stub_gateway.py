"""The gateway as `python -m gateway` serves it (its settings from the environment, its protocol), with the tests'
stub in place of its Triton client: every Triton request answered after STUB_DELAY_S seconds, the answer then built
and sent as for a real one (documents returned where the call asks). For measuring the gateway alone, its answers
included. Run as a file, so that the gateway, its stub and what they import come from the tree on PYTHONPATH (an
older checkout's included):

    PYTHONPATH=. GATEWAY_PORT=8080 STUB_DELAY_S=2 .venv/bin/python benchmarks/stub_gateway.py
"""

from __future__ import annotations

import os

import uvicorn

from gateway import Settings, create_app
from gateway.__main__ import server_options
from tests.gateway.stub import StubClient


def main() -> None:
    app = create_app(Settings.from_env(), client=StubClient(rerank_delay_s=float(os.environ.get("STUB_DELAY_S", 0))))
    uvicorn.run(app, **server_options(app))


if __name__ == "__main__":
    main()
