"""What a test or a benchmark needs around a server it starts on this machine: a free port to start it on, and
whether an HTTP endpoint of it answers."""

from __future__ import annotations

import socket
import urllib.request


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick; the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether `url` answers 200 (a readiness endpoint); no answer, or any other, is False."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False
