"""A Spark standalone cluster on 127.0.0.1 for development and tests: one master and N workers
run from the PySpark installation (``<pyspark>/bin/spark-class``, no separate Spark download),
each worker with a work folder of its own, so that a driver started with
``--master spark://127.0.0.1:PORT`` runs its tasks in executor JVMs that the workers launch.

Everything the cluster owns lives in one home folder::

    <home>/conf/            SPARK_CONF_DIR: empty, so no spark-env.sh or spark-defaults.conf of the
                            machine plays a part
    <home>/logs/            SPARK_LOG_DIR
    <home>/master.log       the master JVM's stdout and stderr (Spark logs INFO to stderr)
    <home>/worker<i>.log    worker i's stdout and stderr (i = 0, 1, ...)
    <home>/worker<i>/       worker i's work folder: ``<app id>/<executor id>/{stdout,stderr}`` per
                            executor, the application's jars fetched from the driver beside them

Ports are picked free on 127.0.0.1 when :meth:`StandaloneCluster.start` runs: the master's RPC
port (:attr:`StandaloneCluster.master_url`), the master's web UI (its JSON status, polled to
know when the cluster is ready) and each worker's web UI; the workers' RPC ports are left to
the OS.

Executors are the workers' children, in the workers' process groups: stopping a worker's group
stops its executors as well. ``PYSPARK_PYTHON`` is the Python that runs this module (the
project's virtualenv), so Python workers on the executors, if a job needs any, run the same
interpreter and packages as the driver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from cdclake.testing.processes import free_port, killpg

#: the JVM heap of the master and of each worker daemon (not of the executors: a worker offers
#: ``memory_per_worker`` to executors, which run in JVMs of their own)
DAEMON_MEMORY = "512m"
#: inherited variables that would change what spark-class starts or what the daemons read
_DROPPED_ENV = (
    "SPARK_CONF_DIR", "SPARK_MASTER_OPTS", "SPARK_WORKER_OPTS", "SPARK_DAEMON_JAVA_OPTS",
    "SPARK_DAEMON_CLASSPATH", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY", "SPARK_WORKER_INSTANCES",
    "SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_PORT",
    "SPARK_WORKER_WEBUI_PORT", "SPARK_PUBLIC_DNS", "PYSPARK_SUBMIT_ARGS", "PYSPARK_DRIVER_PYTHON",
)



def spark_home() -> Path:
    """The PySpark package folder, which holds ``bin/spark-class`` and ``jars/``: the
    ``SPARK_HOME`` of the cluster."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class StandaloneCluster:
    """A standalone Spark cluster on 127.0.0.1: one master and ``workers`` workers, each offering
    ``cores_per_worker`` cores and ``memory_per_worker`` of memory (Spark's notation: ``1g``,
    ``512m``) to executors, with its state in ``home`` (see the module doc).

    Use as a context manager or call :meth:`start` and :meth:`stop`. The daemons run in sessions
    of their own (a Ctrl-C in the terminal does not reach them); :meth:`stop` ends them and
    their executors.
    """

    def __init__(self, home: Path, workers: int = 2, cores_per_worker: int = 1, memory_per_worker: str = "1g",
                 python: Optional[str] = None, daemon_memory: str = DAEMON_MEMORY):
        if workers < 1 or cores_per_worker < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.home = Path(home).resolve()
        self.workers = int(workers)
        self.cores_per_worker = int(cores_per_worker)
        self.memory_per_worker = str(memory_per_worker)
        #: the Python executors run (``PYSPARK_PYTHON``); default: the one running this module
        self.python = python or sys.executable
        self.daemon_memory = daemon_memory
        self.spark_home = spark_home()
        self.master_port: Optional[int] = None
        self.master_webui_port: Optional[int] = None
        self._master: Optional[subprocess.Popen] = None
        self._workers: list[subprocess.Popen] = []

    # -- addresses and paths ---------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """The URL drivers connect to, ``spark://127.0.0.1:PORT`` (known once started)."""
        if self.master_port is None:
            raise RuntimeError("the cluster has not been started")
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def status_url(self) -> str:
        """The master's JSON status, ``http://127.0.0.1:WEBUI/json/``."""
        if self.master_webui_port is None:
            raise RuntimeError("the cluster has not been started")
        return f"http://127.0.0.1:{self.master_webui_port}/json/"

    def work_dir(self, i: int) -> Path:
        """Worker ``i``'s work folder (executors' working folders and logs)."""
        return self.home / f"worker{i}"

    def log_path(self, name: str) -> Path:
        """The stdout/stderr file of daemon ``name`` (``master``, ``worker0`` ...)."""
        return self.home / f"{name}.log"

    def __repr__(self) -> str:
        url = self.master_url if self.master_port is not None else "not started"
        return f"StandaloneCluster({url}, workers={self.workers}, home={self.home})"

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- state -----------------------------------------------------------------------------

    def status(self, timeout_s: float = 2.0) -> dict:
        """The master's JSON status (``workers``, ``aliveworkers``, ``activeapps``,
        ``completedapps`` ...), read within ``timeout_s`` seconds. Raises OSError (URLError)
        when the master does not answer."""
        with urllib.request.urlopen(self.status_url, timeout=timeout_s) as r:
            return json.loads(r.read().decode("utf-8"))

    def alive_workers(self, status: Optional[dict] = None) -> int:
        """How many workers the master counts ALIVE."""
        st = self.status() if status is None else status
        return sum(1 for w in st.get("workers", []) if w.get("state") == "ALIVE")

    def is_running(self) -> bool:
        """Whether the master and every worker process started here are alive."""
        procs = [self._master, *self._workers]
        return self._master is not None and all(p is not None and p.poll() is None for p in procs)

    # -- start and stop --------------------------------------------------------------------

    def start(self, timeout_s: float = 90) -> "StandaloneCluster":
        """Start the master, then the workers, and return once the master reports every worker
        ALIVE (polled at :attr:`status_url` every 0.2 s). Raises RuntimeError, with the end of
        the daemons' logs, when spark-class is missing, a daemon exits, or the cluster is not
        ready within ``timeout_s`` seconds; the daemons started are then stopped. Does nothing
        when this cluster runs already."""
        if self._master is not None:
            if self.is_running():
                return self
            self.stop()
        spark_class = self.spark_home / "bin" / "spark-class"
        if not spark_class.exists():
            raise RuntimeError(f"cannot start a Spark cluster: {spark_class} not found (is pyspark installed?)")
        deadline = time.monotonic() + timeout_s
        self.home.mkdir(parents=True, exist_ok=True)
        for d in ("conf", "logs"):
            (self.home / d).mkdir(exist_ok=True)
        env = self._env()
        self.master_port, self.master_webui_port = free_port(), free_port()
        while self.master_webui_port == self.master_port:
            self.master_webui_port = free_port()
        try:
            self._master = self._spawn("master", [
                str(spark_class), "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1", "--port", str(self.master_port), "--webui-port", str(self.master_webui_port),
            ], env)
            # workers retry a refused registration only after several seconds: start them once
            # the master answers
            self._wait(deadline, lambda st: st.get("status") == "ALIVE", "the master to answer")
            for i in range(self.workers):
                self.work_dir(i).mkdir(exist_ok=True)
                self._workers.append(self._spawn(f"worker{i}", [
                    str(spark_class), "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", "127.0.0.1", "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
                    "--work-dir", str(self.work_dir(i)), "--webui-port", str(free_port()),
                ], env))
            self._wait(deadline, lambda st: self.alive_workers(st) >= self.workers,
                       f"{self.workers} workers to be ALIVE")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop the workers (and their executors), then the master: SIGTERM to each process
        group, SIGKILL to a group still alive after ``timeout_s`` seconds. Returns once they are
        gone; does nothing when nothing runs."""
        groups = [p for p in [*self._workers, self._master] if p is not None]
        for p in groups:
            killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for p in groups:
            if not self._wait_group_gone(p, deadline):
                killpg(p.pid, signal.SIGKILL)
                self._wait_group_gone(p, time.monotonic() + 10)
        self._workers = []
        self._master = None

    # -- pieces ----------------------------------------------------------------------------

    def _env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
        env.update({
            "SPARK_HOME": str(self.spark_home),
            "SPARK_CONF_DIR": str(self.home / "conf"),
            "SPARK_LOG_DIR": str(self.home / "logs"),
            "SPARK_WORKER_DIR": str(self.home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "PYSPARK_PYTHON": self.python,
        })
        return env

    def _spawn(self, name: str, cmd: list[str], env: dict) -> subprocess.Popen:
        with open(self.log_path(name), "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n".encode())
            log.flush()
            return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    cwd=self.home, env=env, start_new_session=True)

    def _wait(self, deadline: float, ready, what: str) -> None:
        """Poll the master's status until ``ready(status)``; RuntimeError with the logs' tails
        when a daemon exits or ``deadline`` (time.monotonic()) passes."""
        last = None
        while True:
            for name, p in self._named():
                if p.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with code {p.returncode} while waiting for {what}\n"
                                       f"{self.log_tails()}")
            try:
                st = self.status(timeout_s=2.0)
                if ready(st):
                    return
                last = f"aliveworkers={st.get('aliveworkers')}, status={st.get('status')}"
            except (OSError, ValueError) as e:
                last = f"no status: {e}"
            if time.monotonic() >= deadline:
                raise RuntimeError(f"Spark cluster at {self.home}: timed out waiting for {what} ({last})\n{self.log_tails()}")
            time.sleep(0.2)

    def _named(self) -> list[tuple[str, subprocess.Popen]]:
        out = [("master", self._master)] if self._master is not None else []
        return out + [(f"worker{i}", p) for i, p in enumerate(self._workers)]

    def log_tails(self, lines: int = 25) -> str:
        """The last ``lines`` lines of each daemon's log, for error messages."""
        parts = []
        for name in ["master", *(f"worker{i}" for i in range(self.workers))]:
            path = self.log_path(name)
            try:
                tail = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"last lines of {path}:\n" + "\n".join("  " + line for line in tail))
        return "\n".join(parts) or "(no logs)"

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        """Whether a process of group ``pgid`` other than a zombie is left (the executors a
        worker started are in its group and may outlive it by a moment)."""
        proc = Path("/proc")
        if not proc.is_dir():  # not Linux
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        for d in proc.iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            # fields: state ppid pgrp ...
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                return True
        return False

    def _wait_group_gone(self, p: subprocess.Popen, deadline: float) -> bool:
        while True:
            p.poll()  # reap the leader
            if p.returncode is not None and not self._group_alive(p.pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
