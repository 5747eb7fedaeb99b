"""What the request bodies cost the gateway to hold, counted as they arrive: each call's body is taken from one
budget chunk by chunk, as its bytes come, and given back once its answer is sent. A client that declares a body and
sends nothing holds nothing (room was once reserved on the declared length, and two silent 32 MiB declarations kept
every other caller at 503 until their body timeout)."""

from __future__ import annotations


class BodyTooLarge(Exception):
    pass


class OverBudget(Exception):
    pass


class BodyBudget:
    """Bytes of request bodies held at once, from their arrival until the answer is sent. A body parsed into Python
    objects takes many times its size (docs/OPERATIONS.md, Gateway memory), so this bounds the gateway's memory
    across calls as max_body_bytes bounds one call's. One event loop: no lock."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


class HeldBody:
    """One call's body as it arrives, at most `max_bytes`, its room in `budget` taken chunk by chunk."""

    def __init__(self, budget: BodyBudget, max_bytes: int) -> None:
        self.budget, self.max_bytes = budget, max_bytes
        self.chunks: list[bytes] = []
        self.size = self.held = 0
        self.complete = False  # its last chunk has arrived

    def add(self, chunk: bytes, last: bool, keep: bool = True) -> None:
        """One more chunk; with `keep` False it is only counted against the size limit (a refused body read off the
        connection and dropped)."""
        self.complete = last
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise BodyTooLarge
        if keep:
            if not self.budget.take(len(chunk)):
                raise OverBudget
            self.held += len(chunk)
            self.chunks.append(chunk)

    def whole(self) -> bytes:
        """The body read, as one bytes (its room stays held until `release`)."""
        body, self.chunks = b"".join(self.chunks), []
        return body

    def release(self) -> None:
        self.budget.give(self.held)
        self.held, self.chunks = 0, []
