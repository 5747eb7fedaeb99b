"""The Triton ensembles the gateway calls, one `AsyncRerankClient` each, made at first use.

A client reads its model's request limits from the ensemble's preprocess step; which step that is, the ensemble's
own configuration says (the step that takes QUERY), so a second model served beside `reranker`
(`reranker-model ensemble`: NAME_preprocess -> NAME_engine -> NAME_calibrate) gets its own limits, not the default's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from reranker_client import AsyncRerankClient


def preprocess_step(config: Mapping[str, Any], ensemble: str) -> str:
    """The name of the step that takes the ensemble's QUERY, from its model config (JSON form)."""
    for step in config.get("ensemble_scheduling", {}).get("step", []):
        if "QUERY" in step.get("input_map", {}):
            return step["model_name"]
    raise ValueError(f"{ensemble} is not an ensemble whose step takes QUERY")


class TritonModels:
    """`given` clients (tests) are used as they are and not closed here."""

    def __init__(self, make_client: Callable[[str], AsyncRerankClient],
                 given: Mapping[str, AsyncRerankClient] | None = None) -> None:
        self._make = make_client
        self._given = dict(given or {})
        self._clients: dict[str, AsyncRerankClient] = dict(self._given)
        self._lock = asyncio.Lock()

    async def client(self, ensemble: str) -> AsyncRerankClient:
        if ensemble not in self._clients:
            async with self._lock:
                if ensemble not in self._clients:
                    self._clients[ensemble] = await self._connect(ensemble)
        return self._clients[ensemble]

    async def _connect(self, ensemble: str) -> AsyncRerankClient:
        client = self._make(ensemble)
        try:
            answer = await client.client.get_model_config(ensemble, as_json=True)
            client.limits_model_name = preprocess_step(answer["config"], ensemble)
        except BaseException:
            await client.close()
            raise
        return client

    async def close(self) -> None:
        for name, client in self._clients.items():
            if name not in self._given:
                await client.close()
