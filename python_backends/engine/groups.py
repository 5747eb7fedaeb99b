"""Which hand-over a sequence belongs to, carried in the id it has in vLLM.

The engine step hands a request's sequences to vLLM one `encode` call each, a window at a time; the scheduler of
`scheduler.py` (in vLLM's engine-core process) adds a window's sequences to vLLM's queue only once all of them have
arrived. Its only channel is the request id, so the id says the window and how many sequences it has:
`<request>.w<window>.of<size>-<n>` (vLLM may append a suffix of its own after a `-`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SEQUENCE_ID = re.compile(r"(?P<key>.+\.w\d+)\.of(?P<size>\d+)-\d+(?:-|$)")


@dataclass(frozen=True)
class Group:
    key: str  # the request and its window: the same for every sequence of one hand-over
    size: int  # how many sequences the hand-over has


def sequence_ids(request_id: str, window: int, members: range) -> list[str]:
    """vLLM request ids of one window's sequences (`members`: their rows in the request)."""
    return [f"{request_id}.w{window}.of{len(members)}-{n}" for n in members]


def group_of(sequence_id: str) -> Group | None:
    """The hand-over a vLLM request id belongs to; None for an id this engine step did not make."""
    match = _SEQUENCE_ID.match(sequence_id)
    return Group(match["key"], int(match["size"])) if match else None
