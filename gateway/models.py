"""The Triton ensembles the gateway calls, one `AsyncRerankClient` each, made at first use and connected by reading
the ensemble's request limits (`AsyncRerankClient.limits`: the ensemble's own steps hold them, so a second model
served beside `reranker` gets its own limits, not the default's)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from reranker_client import AsyncRerankClient


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
            await client.limits()
        except BaseException:
            await client.close()
            raise
        return client

    async def close(self) -> None:
        for name, client in self._clients.items():
            if name not in self._given:
                await client.close()
