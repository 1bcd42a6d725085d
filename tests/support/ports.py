"""Loopback ports for the test servers, shared by tests/e2e and tests/multinode
(tests/engines keeps a `free_port` of its own that never hands out a port twice).

    free_port()          # any free port: the kernel's pick, for a server started once
    restartable_port()   # a free port that no client socket can take while the server
                         # is down, for a server stopped and started again on it

Why two: a port from free_port() lies in the kernel's ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range), from which the kernel also picks the local
port of every outgoing connection. While a broker is stopped for a test of the relay's
backlog, its port is free, and any connection made meanwhile (a node to PostgreSQL, a
client to another server) may get it as its local port. That socket, and its TIME_WAIT
for 60 s after it closes, keeps the broker from binding the port again: Kafka retried
three times and the test failed (CI, 2026-11-28). The kernel never hands out a port
below the ephemeral range on its own, so a port taken from there stays free for the
broker unless something binds it explicitly.
"""

from __future__ import annotations

import random
import socket

# Below the ephemeral range, and above the ports that well-known services use.
_LOW = 10000


def free_port() -> int:
    """A port nothing listens on at 127.0.0.1 just now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def restartable_port() -> int:
    """A free port at 127.0.0.1 outside the kernel's ephemeral range (below it, or above
    it when there is no room below): one that only an explicit bind can take."""
    lo, hi = _ephemeral_range()
    if lo - _LOW >= 1000:
        choices = range(_LOW, lo)
    elif 65535 - hi >= 1000:
        choices = range(hi + 1, 65536)
    else:  # the whole space is ephemeral: nothing better than the kernel's pick
        return free_port()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.choice(choices)
        # No SO_REUSEADDR: a socket in TIME_WAIT on the port makes this bind fail too.
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free loopback port in {choices.start}-{choices.stop - 1}")
