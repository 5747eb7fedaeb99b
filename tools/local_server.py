"""What a test or a benchmark needs around a server it starts on this machine: a free port to start it on, and
whether an HTTP endpoint of it answers."""

from __future__ import annotations

import random
import socket
import urllib.request
from pathlib import Path

LOWEST_PORT = 10000


def _ephemeral_start() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections and bind(0) take ports from it)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback port nothing listens on now, below the ephemeral range: a server binds it only once its models
    have loaded (a minute on two busy cores), and a port of the ephemeral range is taken meanwhile by some
    connection often enough to fail a start."""
    while True:
        port = random.randrange(LOWEST_PORT, _ephemeral_start())
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Whether `url` answers 200 (a readiness endpoint); no answer, or any other, is False."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status == 200
    except OSError:
        return False
