"""A real PostgreSQL server for tests: one cluster on 127.0.0.1 only, run from Debian's packages
(``/usr/lib/postgresql/<version>/bin``, the newest version installed; ``bin/setup --test``
installs the ``postgresql`` package when there is none), set up for logical decoding so that
Debezium's PostgreSQL connector (:mod:`cdclake.testing.kafka_connect`) can stream its changes.

Everything the server owns lives in one home folder::

    <home>/postgresql.conf  the server's settings, written on every start (``config_file``: the
                            data folder's own postgresql.conf, from initdb, is not read)
    <home>/pg_hba.conf      trust for every user and database, and for replication, over the
                            Unix socket and 127.0.0.1; written on every start
    <home>/data/            the cluster (PGDATA): made by initdb on first start only, with the
                            superuser ``postgres``, encoding UTF8 and locale C (byte-wise
                            collation, the same on every machine); ``data/postmaster.pid`` names
                            the running server
    <home>/run/             the Unix socket (``unix_socket_directories``)
    <home>/postgres.log     the server's stderr (its log), appended to on every start

The cluster outlives :meth:`PostgresServer.stop`, so a restarted server has the databases,
replication slots and publications it had. Durability is traded for speed (``fsync``,
``synchronous_commit`` and ``full_page_writes`` off): a crash of the machine may lose the
cluster, a crash of the server does not.

PostgreSQL refuses to run as root. When this process runs as root, ``initdb`` and ``postgres``
run as the ``postgres`` system user (made by the Debian package) through ``setpriv``, which
switches user and then executes the program (no child process in between: the server's pid is
the one this module started and signals). The data and socket folders are then owned by
``postgres``, and the home folder and each folder above it that the ``postgres`` user cannot
enter is given the search (execute) permission for it (others' ``x`` bit, or the group's or
owner's when the folder is ``postgres``'s): pytest's temporary folders
(``/tmp/pytest-of-root/...``) are mode 700. Nothing is made readable or writable that was not:
entering a folder needs the names within it. When not root, everything runs as the current user.
"""

from __future__ import annotations

import os
import pwd
import re
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from cdclake.testing.processes import running_pid, stop_group

#: the system user that runs the server when this process runs as root
SERVER_USER = "postgres"
#: the superuser that initdb creates; every connection of :class:`PostgresServer` logs in as it
SUPERUSER = "postgres"
#: a Unix socket path longer than this does not fit ``sockaddr_un`` (PostgreSQL refuses to start)
_MAX_SOCKET_PATH = 107
#: inherited variables (PGDATA, PGPORT, PGHOST, ...) that would change what the tools do
_PG_ENV = re.compile(r"^PG[A-Z_]*$")


def _signal(pid: int, sig: int) -> None:
    """``sig`` to ``pid`` alone (a process already gone is not an error)."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def pg_bindir() -> Path:
    """The ``bin`` folder of the newest PostgreSQL installed from Debian's packages
    (``/usr/lib/postgresql/<major>/bin``). Raises RuntimeError when there is none."""
    found = []
    for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        try:
            found.append((float(initdb.parent.parent.name), initdb.parent))
        except ValueError:  # not a version folder
            continue
    if not found:
        raise RuntimeError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run bin/setup --test")
    return max(found)[1]


def _psycopg():
    """The psycopg (3) module, with a hint when the test extras are not installed."""
    try:
        import psycopg
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("psycopg is not installed: run bin/setup --test (the 'test' extra)") from e
    return psycopg


def _search_bit(st: os.stat_result, uid: int, gids: set[int]) -> int:
    """The permission bit that lets user ``uid`` (in groups ``gids``) enter a folder with
    status ``st``: the owner's, the group's or the others' execute bit, whichever class applies."""
    if st.st_uid == uid:
        return stat.S_IXUSR
    if st.st_gid in gids:
        return stat.S_IXGRP
    return stat.S_IXOTH


def _let_user_enter(folder: Path, user: pwd.struct_passwd) -> None:
    """Give ``user`` the search permission on ``folder`` and on each folder above it where it
    lacks it (only that bit is added)."""
    gids = set(os.getgrouplist(user.pw_name, user.pw_gid))
    for d in [*reversed(folder.parents), folder]:
        st = d.stat()
        bit = _search_bit(st, user.pw_uid, gids)
        if not st.st_mode & bit:
            os.chmod(d, stat.S_IMODE(st.st_mode) | bit)


class PostgresServer:
    """One PostgreSQL server on ``127.0.0.1:port`` with its cluster in ``home``, ready for
    logical replication (``wal_level=logical``, the ``pgoutput`` plugin is built in).

    Connections are made with psycopg 3 over TCP as the superuser ``postgres`` (trust, no
    password): :meth:`connect` for transactions of a test's own, :meth:`execute` and
    :meth:`query` for one statement (or several, without parameters) in autocommit mode.
    ``bindir`` is the folder of ``initdb`` and ``postgres`` (default: :func:`pg_bindir`).
    """

    def __init__(self, home: Path, port: int, bindir: Optional[Path] = None):
        self.home = Path(home).resolve()
        self.port = int(port)
        self._bindir = Path(bindir) if bindir is not None else None
        self._proc: Optional[subprocess.Popen] = None

    # -- paths and addresses ---------------------------------------------------------------

    @property
    def bindir(self) -> Path:
        """The folder of the server's programs (found on first use)."""
        if self._bindir is None:
            self._bindir = pg_bindir()
        return self._bindir

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def socket_dir(self) -> Path:
        return self.home / "run"

    @property
    def config_path(self) -> Path:
        return self.home / "postgresql.conf"

    @property
    def hba_path(self) -> Path:
        return self.home / "pg_hba.conf"

    @property
    def log_path(self) -> Path:
        return self.home / "postgres.log"

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string for database ``dbname`` over TCP, as the superuser."""
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def __repr__(self) -> str:
        return f"PostgresServer(127.0.0.1:{self.port}, home={self.home})"

    # -- process state ---------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The pid of this home's running server (the postmaster, also its process group id),
        or None when none runs (a stale ``postmaster.pid`` is ignored)."""
        return running_pid(self._proc, lambda: int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]),
                           self._is_our_server)

    def is_running(self) -> bool:
        """Whether this home's server process is alive (it may still be starting)."""
        return self.pid is not None

    def _is_our_server(self, pid: int) -> bool:
        """Whether ``pid`` is alive and is the postmaster of this home's cluster (the pid in a
        stale ``postmaster.pid`` may belong to another process by now)."""
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return bool(cmdline[0]) and cmdline[0].endswith(b"/postgres") and str(self.data_dir).encode() in cmdline

    def configured_port(self) -> Optional[int]:
        """The port in this home's ``postgresql.conf`` (that of the server started last), or None
        when there is none."""
        try:
            m = re.search(r"^port = '(\d+)'$", self.config_path.read_text(), re.MULTILINE)
        except OSError:
            return None
        return int(m.group(1)) if m else None

    # -- start and stop --------------------------------------------------------------------

    def start(self, timeout_s: float = 60) -> "PostgresServer":
        """Start the server and return once it accepts connections on ``127.0.0.1:port``.

        Runs initdb when the data folder has no cluster (first start only), writes
        ``postgresql.conf`` and ``pg_hba.conf``, and runs ``postgres`` in a session of its own.
        If this home's server already runs on this port, only waits for it to accept
        connections. Raises RuntimeError, with the end of ``postgres.log``, when PostgreSQL or
        psycopg is missing, this home's server runs on another port, initdb fails, the socket
        path is too long, the server exits, or it does not accept connections within
        ``timeout_s`` seconds (a server this call started is then stopped).
        """
        deadline = time.monotonic() + timeout_s
        if self.is_running():  # started before (maybe by another process): not ours to stop
            running_port = self.configured_port()
            if running_port is not None and running_port != self.port:
                raise RuntimeError(f"the PostgreSQL server of {self.home} already runs on port {running_port}, "
                                   f"not {self.port}: stop it first")
            self._wait_ready(deadline)
            return self
        _psycopg()
        socket_path = self.socket_dir / f".s.PGSQL.{self.port}"
        if len(str(socket_path).encode()) > _MAX_SOCKET_PATH:
            raise RuntimeError(f"cannot start PostgreSQL: the socket path {socket_path} is longer than "
                               f"{_MAX_SOCKET_PATH} bytes; use a shorter home folder")
        self.home.mkdir(parents=True, exist_ok=True)
        for d in (self.data_dir, self.socket_dir):
            d.mkdir(mode=0o700, exist_ok=True)
        user = self._server_user()
        if user is not None:
            _let_user_enter(self.home, user)
            for d in (self.data_dir, self.socket_dir):
                os.chown(d, user.pw_uid, user.pw_gid)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        self._write_config()

        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting PostgreSQL on 127.0.0.1:{self.port}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._as_server_user([str(self.bindir / "postgres"), "-D", str(self.data_dir),
                                      "-c", f"config_file={self.config_path}"]),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                env=self._env(),
                start_new_session=True,
            )
        try:
            self._wait_ready(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop the server: SIGINT to the postmaster (PostgreSQL's fast shutdown: sessions and
        replication connections are ended, a checkpoint is written), and SIGKILL to its process
        group if it still runs after ``timeout_s`` seconds. Returns once it is gone; does nothing
        when it does not run. Raises RuntimeError when it survives SIGKILL."""
        stop_group(self._proc, self.pid, signal.SIGINT, timeout_s, self._is_our_server, "PostgreSQL",
                   first=lambda pid: _signal(pid, signal.SIGINT))
        self._proc = None

    # -- start-up pieces -------------------------------------------------------------------

    @staticmethod
    def _server_user() -> Optional[pwd.struct_passwd]:
        """The ``postgres`` system user when this process runs as root (the server must not),
        else None. Raises RuntimeError when root and there is no such user."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise RuntimeError(f"PostgreSQL cannot run as root and there is no {SERVER_USER!r} user: "
                               "run bin/setup --test (the Debian package creates it)") from None

    def _as_server_user(self, argv: list[str]) -> list[str]:
        """``argv`` to run as the ``postgres`` user when root (``setpriv`` executes it in place),
        else as it is."""
        if os.geteuid() != 0:
            return argv
        return ["setpriv", f"--reuid={SERVER_USER}", f"--regid={SERVER_USER}", "--init-groups", "--", *argv]

    @staticmethod
    def _env() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not _PG_ENV.match(k)}

    def _initdb(self) -> None:
        """Make a new cluster in the data folder (superuser ``postgres``, trust, UTF8, locale C)."""
        r = subprocess.run(
            self._as_server_user([str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER,
                                  "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync",
                                  "--no-instructions"]),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=self.home, env=self._env(),
        )
        if r.returncode != 0:
            raise RuntimeError(f"initdb of {self.data_dir} failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")

    def _write_config(self) -> None:
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
            "hba_file": str(self.hba_path),
            # logical decoding for Debezium (pgoutput); each connector holds a slot and a sender
            "wal_level": "logical",
            "max_replication_slots": "20",
            "max_wal_senders": "20",
            "max_connections": "100",
            # a test cluster: speed over durability (a server crash still loses nothing)
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "shared_buffers": "64MB",
            # the same rendering of times and messages on every machine
            "timezone": "UTC",
            "log_timezone": "UTC",
            "datestyle": "iso, mdy",
            "lc_messages": "C",
            "log_line_prefix": "%m [%p] %q%u@%d ",
        }
        text = "# written by cdclake.testing.postgres on every start\n"
        text += "".join(f"{k} = '{v}'\n" for k, v in settings.items())
        self.config_path.write_text(text)
        self.hba_path.write_text(
            "# written by cdclake.testing.postgres on every start: trust on the socket and 127.0.0.1\n"
            "local all         all              trust\n"
            "local replication all              trust\n"
            "host  all         all 127.0.0.1/32 trust\n"
            "host  replication all 127.0.0.1/32 trust\n"
        )
        for f in (self.config_path, self.hba_path):
            f.chmod(0o644)

    def _wait_ready(self, deadline: float) -> None:
        psycopg = _psycopg()
        while True:
            pid = self.pid
            if pid is None:
                code = self._proc.returncode if self._proc is not None else None
                raise RuntimeError(f"PostgreSQL exited during start-up (exit code {code})\n{self._log_tail()}")
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2):
                    return
            except psycopg.OperationalError as e:
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"PostgreSQL on 127.0.0.1:{self.port} did not accept connections in time "
                                       f"(pid {pid}): {e}\n{self._log_tail()}") from None
            time.sleep(0.05)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.log_path})"
        return f"last lines of {self.log_path}:\n" + "\n".join("  " + line for line in tail)

    # -- clients ---------------------------------------------------------------------------

    def connect(self, dbname: str = "postgres", autocommit: bool = False, **kwargs: Any):
        """A new psycopg connection to database ``dbname`` as the superuser (the caller closes
        it: ``with server.connect(...) as conn``). ``kwargs`` go to ``psycopg.connect`` (e.g.
        ``row_factory``)."""
        return _psycopg().connect(self.conninfo(dbname), autocommit=autocommit, **kwargs)

    def execute(self, sql: str, params: Optional[Sequence[Any]] = None, dbname: str = "postgres") -> None:
        """Run ``sql`` in autocommit mode on a connection of its own (so ``CREATE DATABASE``
        works). Without ``params`` it may hold several statements separated by ``;``, run as
        one transaction (PostgreSQL's simple query protocol) unless they say ``BEGIN``/``COMMIT``
        themselves. Raises psycopg's errors."""
        with self.connect(dbname, autocommit=True) as conn:
            conn.execute(sql, params)

    def query(self, sql: str, params: Optional[Sequence[Any]] = None, dbname: str = "postgres") -> list[tuple]:
        """The rows of one query as tuples of Python values (``numeric`` as Decimal, ``timestamptz``
        as an aware datetime, ``bytea`` as bytes, ...), in autocommit mode on a connection of its
        own. Raises psycopg's errors."""
        with self.connect(dbname, autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()
