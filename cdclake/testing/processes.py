"""What the test daemons (:mod:`cdclake.testing.kafka_broker`,
:mod:`cdclake.testing.spark_cluster`) share: free ports and signals to process groups."""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it). Another
    process may take it before it is used; good enough for tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def killpg(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid`` (a daemon started with ``start_new_session=True``
    leads its own group: pgid == its pid); a group already gone is not an error."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
