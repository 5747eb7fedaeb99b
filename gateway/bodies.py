"""What the request bodies cost the gateway to hold, counted as they arrive: each call's body is taken from one
budget chunk by chunk, as its bytes come, and given back once its answer is sent. A client that declares a body and
sends nothing holds nothing (room was once reserved on the declared length, and two silent 32 MiB declarations kept
every other caller at 503 until their body timeout).

A body is weighed, not only measured: once parsed, each JSON value is a Python object of its own, and a body of many
small ones (`[[[]]]`, `{"k":"v"}` by the million) took 20-50 times its bytes where one of text takes 6-10
(docs/OPERATIONS.md, Gateway memory). So each value counts VALUE_BYTES on top of the bytes that spell it, and the
budget bounds memory whatever the body's shape; the values are counted as the bytes arrive, before anything is
parsed.
"""

from __future__ import annotations

import re

# What one JSON value weighs beyond the bytes that spell it. Parsed and held, a value took about 95 bytes (nested
# lists, small objects, short strings) and a byte of text up to 9.6 (64 KB strings of wide characters: the body is
# decoded whole to be parsed, then each string): at 10 a value, each unit of weight stands for at most ~10 bytes of
# memory, whatever the shape.
VALUE_BYTES = 10
# Outside strings, each value but a container's first follows a comma, each object member's value a colon, and each
# container opens with a bracket: these count a body's values, to within one per container.
_STRUCTURAL = b",:[{"
_NOT_STRUCTURAL = bytes(sorted(set(range(256)) - set(_STRUCTURAL)))
_ESCAPE = re.compile(rb"\\.", re.DOTALL)  # inside a string; outside one, a backslash fails the parse anyway


class BodyTooLarge(Exception):
    pass


class TooHeavy(Exception):
    """The body alone weighs more than the whole budget: it could never be taken."""

    def __init__(self, size: int, values: int, weight: int) -> None:
        super().__init__()
        self.size, self.values, self.weight = size, values, weight


class OverBudget(Exception):
    pass


class JsonValues:
    """Counts a JSON body's values chunk by chunk, without parsing it (a chunk may end inside a string, or inside an
    escape). C-speed: 33 MB of the densest shapes in about 0.1 s."""

    def __init__(self) -> None:
        self.in_string, self.tail = False, b""

    def count(self, chunk: bytes) -> int:
        chunk = self.tail + chunk
        cut = len(chunk) - (len(chunk) - len(chunk.rstrip(b"\\"))) % 2  # an odd last backslash escapes what comes next
        chunk, self.tail = chunk[:cut], chunk[cut:]
        parts = _ESCAPE.sub(b"", chunk).split(b'"')  # with escapes gone, every quote opens or closes a string
        outside = b"".join(parts[1::2] if self.in_string else parts[::2])
        self.in_string ^= len(parts) % 2 == 0
        return len(outside.translate(None, _NOT_STRUCTURAL))


class BodyBudget:
    """The weight of the request bodies held at once, from their arrival until the answer is sent: it bounds the
    gateway's memory across calls as max_body_bytes bounds one call's bytes. One event loop: no lock."""

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
    """One call's body as it arrives, at most `max_bytes`, its weight in `budget` taken chunk by chunk."""

    def __init__(self, budget: BodyBudget, max_bytes: int) -> None:
        self.budget, self.max_bytes = budget, max_bytes
        self.values = JsonValues()
        self.chunks: list[bytes] = []
        self.size = self.counted = self.held = 0
        self.complete = False  # its last chunk has arrived

    def add(self, chunk: bytes, last: bool, keep: bool = True) -> None:
        """One more chunk; with `keep` False it is only counted against the size limit (a refused body read off the
        connection and dropped)."""
        self.complete = last
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise BodyTooLarge
        if keep:
            values = self.values.count(chunk)
            self.counted += values
            weight = len(chunk) + VALUE_BYTES * values
            if self.held + weight > self.budget.limit:
                raise TooHeavy(self.size, self.counted, self.held + weight)
            if not self.budget.take(weight):
                raise OverBudget
            self.held += weight
            self.chunks.append(chunk)

    def whole(self) -> bytes:
        """The body read, as one bytes (its weight stays held until `release`)."""
        body, self.chunks = b"".join(self.chunks), []
        return body

    def release(self) -> None:
        self.budget.give(self.held)
        self.held, self.chunks = 0, []
