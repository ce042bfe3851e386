"""What the test daemons (:mod:`cdclake.testing.kafka_broker`, :mod:`cdclake.testing.kafka_connect`,
:mod:`cdclake.testing.postgres`, :mod:`cdclake.testing.spark_cluster`) share: free ports, the
java to run, signals to process groups and waiting for a daemon to be gone."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional


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


def java(what: str) -> str:
    """The ``java`` to start ``what`` (a daemon's name, for the error) with: ``$JAVA_HOME/bin/java``,
    else the one on PATH. Raises RuntimeError when there is none."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if not found:
        raise RuntimeError(f"cannot start {what}: no java on PATH (Java 17 or newer is needed)")
    return found


def wait_gone(proc: Optional[subprocess.Popen], pid: int, alive: Callable[[int], bool], timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` seconds for the daemon ``pid`` to exit: reaped through ``proc``
    when this process started it, else as long as ``alive(pid)`` (the pid is still that
    daemon's) says so. True when it is gone."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.pid == pid:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                return True
            except subprocess.TimeoutExpired:
                return False
        if not alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def stop_group(proc: Optional[subprocess.Popen], pid: Optional[int], sig: int, timeout_s: float,
               alive: Callable[[int], bool], what: str, first: Callable[[int], None] | None = None) -> None:
    """Stop the daemon ``pid`` (None: none runs): ``sig`` to its process group (or ``first(pid)``,
    e.g. a signal to the leader alone), SIGKILL to the group if it still runs after
    ``timeout_s`` seconds, and reap ``proc``. Raises RuntimeError when it survives SIGKILL
    (``what`` names it)."""
    if pid is not None:
        (first or (lambda p: killpg(p, sig)))(pid)
        if not wait_gone(proc, pid, alive, timeout_s) and sig != signal.SIGKILL:
            killpg(pid, signal.SIGKILL)
        if not wait_gone(proc, pid, alive, 10):
            raise RuntimeError(f"{what} (pid {pid}) did not exit after SIGKILL")
    if proc is not None:
        proc.poll()  # reap


def running_pid(proc: Optional[subprocess.Popen], read_pid: Callable[[], int], alive: Callable[[int], bool]) -> Optional[int]:
    """The pid of a daemon: ``proc``'s while it runs, else the one ``read_pid`` reads (its pid
    file; OSError or ValueError: none) when ``alive`` says it is still that daemon's, else None."""
    if proc is not None and proc.poll() is None:
        return proc.pid
    try:
        pid = read_pid()
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def jvm_alive(pid: int, *markers: bytes) -> bool:
    """Whether ``pid`` is alive and is a JVM whose command line holds each of ``markers`` (its
    main class, its home's settings file): the pid of a daemon that died long ago may belong to
    another process by now, which must not get our signals.

    A zombie (exited, not yet reaped by its parent) counts as gone, but only once none of its
    threads is left: the JVM's main thread shows "Z" as soon as it ends, while its other
    threads may still be shutting down and holding the home's locks. A process whose command
    line is already empty is exiting (its memory gone, its files and locks maybe not yet): alive.
    Without ``/proc`` (not Linux) a live pid is trusted."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or someone else's
        return False
    proc = Path("/proc") / str(pid)
    if not proc.exists():
        return True
    try:
        stat = (proc / "stat").read_text()
        if stat[stat.rindex(")") + 2 :].startswith("Z"):
            return len(os.listdir(proc / "task")) > 1
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    if cmdline == [b""]:
        return True
    return all(m in cmdline for m in markers)
