"""A real Kafka Connect worker for tests: Connect in standalone mode (one JVM, no internal
topics) of the broker's Kafka version, running source connectors, above all Debezium's
PostgreSQL connector (:func:`debezium_postgres_config`), into a broker such as
:class:`cdclake.testing.kafka_broker.KafkaBroker`. Its jars are those ``bin/setup --test`` copies
from Maven Central (``jvm/connect/pom.xml``; versions ``KAFKA_BROKER_VERSION`` and
``DEBEZIUM_VERSION`` in ``cdclake/versions.py``)::

    <repo>/.jars/connect/*.jar                  the worker's classpath: the Connect runtime, the
                                                JSON converter, log4j 2 as the logging backend
    <repo>/.jars/connect/plugins/<plugin>/      ``plugin.path``: each connector in a class loader
                                                of its own (Debezium's Jackson, protobuf and JDBC
                                                driver stay apart from the worker's)

Everything the worker owns lives in one home folder::

    <home>/worker.properties       the worker's settings, written on every start
    <home>/log4j2.properties       its logging: INFO and above to stdout, written on every start
    <home>/connectors/<name>.json  each connector's configuration, written on every start and
                                   given to the worker on its command line
    <home>/offsets.dat             the source offsets (``offset.storage.file.filename``), flushed
                                   every second and when the worker stops
    <home>/connect.log             the JVM's stdout and stderr (the log), appended to on every start
    <home>/connect.pid             the JVM's pid while it runs (also its process group id)

Restarts: a standalone worker keeps no connector configurations of its own, so
:meth:`KafkaConnect.start` names its connectors on the command line each time, and a connector
takes up where the offsets file says it stopped: stop the worker, change the source, start it
again with the same connector name and configuration, and it streams the changes made meanwhile
(Debezium's PostgreSQL connector from its replication slot, no new snapshot). A clean
:meth:`KafkaConnect.stop` flushes the offsets; after :meth:`KafkaConnect.kill` the records of
the last second or so may be written again (at least once, as in production).

Topics: Connect creates each topic before its first record (``topic.creation.enable``, on by
default) for connectors whose configuration has ``topic.creation.default.*`` settings, as
:func:`debezium_postgres_config`'s has (one partition, one replica). The project's broker would
also create them on first use (``auto.create.topics.enable`` is left at Kafka's default, true).

The REST API listens on ``http://127.0.0.1:<rest_port>`` (status of connectors and tasks,
committed offsets).

Each start logs one harmless ERROR, "Failed to discover Converter in .../debezium-postgres":
Debezium 3.6's CloudEventsConverter looks for a JsonConverter method that Kafka 4.0 lacks, and
is left out; nothing here uses it.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Optional

from cdclake.testing.processes import java as processes_java
from cdclake.testing.processes import jvm_alive, running_pid, stop_group

REPO = Path(__file__).resolve().parents[2]
#: where ``bin/setup --test`` puts the worker's jars (and its plugins in ``plugins/``)
DEFAULT_JARS = REPO / ".jars" / "connect"
#: JVM options of the worker: a test worker with a connector or two needs little heap
JVM_OPTS = ["-Xmx512m", "-Xms64m", "-Djava.awt.headless=true"]
#: how often the worker flushes source offsets to ``offsets.dat`` (ms): a restart after a kill
#: repeats at most about this much
OFFSET_FLUSH_INTERVAL_MS = 1000

_LOG4J2 = """\
# written by cdclake.testing.kafka_connect on every start
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d{ISO8601}] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
# every client's and connector's full configuration (hundreds of lines at each start)
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""

#: a connector's configuration: Connect's property names and their values (str; ints and bools
#: are written as Java reads them)
ConnectorConfig = Mapping[str, Any]


def _config_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def debezium_postgres_config(
    port: int,
    dbname: str,
    topic_prefix: str,
    *,
    slot_name: Optional[str] = None,
    publication_name: Optional[str] = None,
    table_include_list: Optional[str] = None,
    publication_autocreate_mode: Optional[str] = None,
    snapshot_mode: str = "initial",
    overrides: Optional[ConnectorConfig] = None,
) -> dict[str, str]:
    """The configuration of a Debezium PostgreSQL connector reading database ``dbname`` of the
    server on ``127.0.0.1:port`` (a :class:`cdclake.testing.postgres.PostgresServer`) as the
    superuser ``postgres``, over the built-in ``pgoutput`` plugin, into topics
    ``<topic_prefix>.<schema>.<table>``, with transaction metadata (``provide.transaction.
    metadata``: BEGIN and END records in ``<topic_prefix>.transaction``, and a ``transaction``
    block in each change).

    ``slot_name`` (default: the prefix, lower-cased, each character PostgreSQL does not allow
    in a slot name replaced by ``_``) and ``publication_name`` (default ``<slot_name>_pub``)
    are per connector, so two connectors on one database do not share them.
    ``table_include_list`` is Debezium's (regular expressions ``schema.table``, comma
    separated); ``publication_autocreate_mode`` defaults to ``filtered`` (a publication of the
    included tables that exist when the connector starts) with an include list and to
    ``all_tables`` (``FOR ALL TABLES``: also tables created later) without one. ``overrides``
    (e.g. ``decimal.handling.mode``, ``time.precision.mode``, ``binary.handling.mode``) replace
    or add settings last.

    Tables without a primary key need ``REPLICA IDENTITY FULL`` (or another replica identity)
    before an UPDATE or DELETE once they are in a publication: PostgreSQL refuses the statement
    otherwise.

    Debezium 3.6 names a PostgreSQL transaction ``<txId>:<lsn>`` with the LSN of the record at
    hand, so the BEGIN record, each change's ``transaction.id`` and the END record of one
    transaction carry different ids: only the ``txId`` before the colon is shared.
    """
    slot = slot_name or re.sub(r"[^a-z0-9_]", "_", topic_prefix.lower())
    config: dict[str, Any] = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": 1,
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": port,
        "database.user": "postgres",
        "database.dbname": dbname,
        "topic.prefix": topic_prefix,
        "slot.name": slot,
        "publication.name": publication_name or f"{slot}_pub",
        "publication.autocreate.mode": publication_autocreate_mode
        or ("filtered" if table_include_list else "all_tables"),
        "provide.transaction.metadata": True,
        "snapshot.mode": snapshot_mode,
        # Connect makes each topic before its first record: one partition, one replica
        "topic.creation.default.partitions": 1,
        "topic.creation.default.replication.factor": 1,
    }
    if table_include_list:
        config["table.include.list"] = table_include_list
    config.update(overrides or {})
    return {k: _config_value(v) for k, v in config.items()}


class KafkaConnect:
    """A Kafka Connect standalone worker writing into the broker at ``bootstrap``, its REST API
    on ``127.0.0.1:rest_port``, its state in ``home``.

    Keys and values are written with Connect's JsonConverter, with the schema in each record
    (``{"schema": ..., "payload": ...}``) unless ``schemas_enable`` is False.
    ``worker_overrides`` replace or add worker settings (e.g. ``producer.linger.ms``); ``jars``
    is the folder ``bin/setup --test`` fills (``<repo>/.jars/connect``).
    """

    def __init__(
        self,
        home: Path,
        bootstrap: str,
        rest_port: int,
        *,
        schemas_enable: bool = True,
        worker_overrides: Optional[Mapping[str, Any]] = None,
        jars: Path = DEFAULT_JARS,
    ):
        self.home = Path(home).resolve()
        self.bootstrap = bootstrap
        self.rest_port = int(rest_port)
        self.schemas_enable = schemas_enable
        self.worker_overrides = dict(worker_overrides or {})
        self.jars = Path(jars).resolve()
        self._proc: Optional[subprocess.Popen] = None

    # -- paths and addresses ---------------------------------------------------------------

    @property
    def rest_url(self) -> str:
        """The REST API's base URL: ``"http://127.0.0.1:PORT"``."""
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def plugin_path(self) -> Path:
        return self.jars / "plugins"

    @property
    def worker_properties_path(self) -> Path:
        return self.home / "worker.properties"

    @property
    def log4j_path(self) -> Path:
        return self.home / "log4j2.properties"

    @property
    def connectors_dir(self) -> Path:
        return self.home / "connectors"

    @property
    def offsets_path(self) -> Path:
        return self.home / "offsets.dat"

    @property
    def log_path(self) -> Path:
        return self.home / "connect.log"

    @property
    def pid_path(self) -> Path:
        return self.home / "connect.pid"

    def __repr__(self) -> str:
        return f"KafkaConnect({self.rest_url} -> {self.bootstrap}, home={self.home})"

    # -- process state ---------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The pid of this home's running worker, or None when none runs (a stale pid file is
        ignored)."""
        return running_pid(self._proc, lambda: int(self.pid_path.read_text().strip()), self._is_our_worker)

    def is_running(self) -> bool:
        """Whether this home's worker process is alive (it may still be starting)."""
        return self.pid is not None

    def _is_our_worker(self, pid: int) -> bool:
        """Whether ``pid`` is alive and is the worker JVM of this home (:func:`jvm_alive`)."""
        return jvm_alive(pid, b"org.apache.kafka.connect.cli.ConnectStandalone", str(self.worker_properties_path).encode())

    # -- start and stop --------------------------------------------------------------------

    def start(self, connectors: Mapping[str, ConnectorConfig], timeout_s: float = 90) -> "KafkaConnect":
        """Start the worker with ``connectors`` (name -> configuration, e.g. from
        :func:`debezium_postgres_config`) and return once its REST API lists them all; use
        :meth:`wait_running` to wait for a connector's task.

        Writes ``worker.properties``, ``log4j2.properties`` and one ``connectors/<name>.json``
        per connector (those of connectors not named are removed), and runs ``java ...
        ConnectStandalone`` in a session of its own. Each connector resumes from its offsets in
        ``offsets.dat``, if any. Raises RuntimeError, with the end of ``connect.log``, when the
        jars or java are missing, the REST port is taken, this home's worker already runs, the
        JVM exits (a connector's configuration is refused: the worker stops), or the connectors
        are not listed within ``timeout_s`` seconds (the JVM is then stopped); ValueError for a
        connector name that cannot name a file (empty, with ``/``, or starting with ``.``).
        """
        deadline = time.monotonic() + timeout_s
        if self.is_running():
            raise RuntimeError(f"the Kafka Connect worker of {self.home} already runs (pid {self.pid}): stop it first")
        java = processes_java("Kafka Connect")
        if not any(self.jars.glob("connect-runtime-*.jar")):
            raise RuntimeError(f"Kafka Connect jars not found in {self.jars}: run bin/setup --test")
        self.home.mkdir(parents=True, exist_ok=True)
        self._write_worker_properties()
        self.log4j_path.write_text(_LOG4J2)
        connector_files = self._write_connectors(connectors)

        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting Kafka Connect on {self.rest_url} "
                      f"-> {self.bootstrap}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [java, *JVM_OPTS, f"-Dlog4j2.configurationFile={self.log4j_path}",
                 "-cp", str(self.jars / "*"), "org.apache.kafka.connect.cli.ConnectStandalone",
                 str(self.worker_properties_path), *map(str, connector_files)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                start_new_session=True,
            )
        self.pid_path.write_text(f"{self._proc.pid}\n")
        try:
            self._wait_listed(set(connectors), deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop the worker: SIGTERM to its process group (connectors stop, offsets are
        flushed), and SIGKILL if it still runs after ``timeout_s`` seconds. Returns once it is
        gone; does nothing when it does not run. Raises RuntimeError when it survives SIGKILL."""
        self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        """SIGKILL the worker's process group at once, as a crash would: offsets not flushed
        yet are lost, so a restart writes some records again."""
        self._signal_and_wait(signal.SIGKILL, 0)

    def _signal_and_wait(self, sig: int, timeout_s: float) -> None:
        stop_group(self._proc, self.pid, sig, timeout_s, self._is_our_worker, "Kafka Connect")
        self._proc = None
        self.pid_path.unlink(missing_ok=True)

    # -- start-up pieces -------------------------------------------------------------------


    def _write_worker_properties(self) -> None:
        schemas = _config_value(self.schemas_enable)
        props: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": schemas,
            "value.converter.schemas.enable": schemas,
            "offset.storage.file.filename": self.offsets_path,
            "offset.flush.interval.ms": OFFSET_FLUSH_INTERVAL_MS,
            "plugin.path": self.plugin_path,
            # plugins are found through their jars' service manifests (Kafka's and Debezium's
            # have them), without scanning every class: a faster start
            "plugin.discovery": "service_load",
            "listeners": self.rest_url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": self.rest_port,
            **self.worker_overrides,
        }
        text = "# written by cdclake.testing.kafka_connect on every start\n"
        text += "".join(f"{k}={_config_value(v)}\n" for k, v in props.items())
        self.worker_properties_path.write_text(text)

    def _write_connectors(self, connectors: Mapping[str, ConnectorConfig]) -> list[Path]:
        """One ``connectors/<name>.json`` (the REST API's create request) per connector; files
        of other connectors are removed. Returns the files in the order of ``connectors``."""
        self.connectors_dir.mkdir(exist_ok=True)
        files = []
        for name, config in connectors.items():
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"not a usable connector name: {name!r}")
            f = self.connectors_dir / f"{name}.json"
            f.write_text(json.dumps({"name": name, "config": {k: _config_value(v) for k, v in config.items()}},
                                    indent=2) + "\n")
            files.append(f)
        for f in self.connectors_dir.glob("*.json"):
            if f not in files:
                f.unlink()
        return files

    def _wait_listed(self, names: set[str], deadline: float) -> None:
        while True:
            pid = self.pid
            if pid is None:
                code = self._proc.returncode if self._proc is not None else None
                raise RuntimeError(f"Kafka Connect exited during start-up (exit code {code})\n{self._log_tail()}")
            try:
                if names <= set(self._get("/connectors", timeout_s=2)):
                    return
            except (OSError, ValueError):  # not listening yet (URLError is an OSError)
                pass
            if time.monotonic() >= deadline:
                raise RuntimeError(f"Kafka Connect on {self.rest_url} did not list {sorted(names)} in time "
                                   f"(pid {pid})\n{self._log_tail()}")
            time.sleep(0.2)

    def _log_tail(self, lines: int = 20) -> str:
        """The ERROR lines that the latest start logged (the cause, ahead of its stack trace),
        then the last ``lines`` lines of ``connect.log``."""
        try:
            log = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        starts = [i for i, line in enumerate(log) if line.startswith("--- ")]
        errors = [line for line in log[starts[-1] if starts else 0 :] if "] ERROR " in line]
        text = ""
        if errors:
            text = f"errors logged since the start in {self.log_path}:\n" + "".join(f"  {e}\n" for e in errors)
        return text + f"last lines of {self.log_path}:\n" + "\n".join("  " + line for line in log[-lines:])

    # -- the REST API ----------------------------------------------------------------------

    def _get(self, path: str, timeout_s: float = 10) -> Any:
        """The JSON body of ``GET <rest_url><path>``; raises urllib's errors (HTTPError for a
        status other than 2xx)."""
        with urllib.request.urlopen(self.rest_url + path, timeout=timeout_s) as r:
            return json.load(r)

    def status(self, name: str) -> dict:
        """The REST API's status of connector ``name``: ``{"connector": {"state": ...},
        "tasks": [{"id": 0, "state": ..., "trace": ...}], ...}``. Raises urllib.error.HTTPError
        (404) for an unknown connector."""
        return self._get(f"/connectors/{urllib.parse.quote(name, safe='')}/status")

    def offsets(self, name: str) -> list[dict]:
        """The source offsets of connector ``name`` that the worker has flushed, as the REST API
        gives them: ``[{"partition": {...}, "offset": {...}}]`` (empty before the first flush).
        Raises urllib.error.HTTPError for an unknown connector."""
        return self._get(f"/connectors/{urllib.parse.quote(name, safe='')}/offsets")["offsets"]

    def wait_running(self, name: str, timeout_s: float = 60) -> dict:
        """Wait until connector ``name`` and each of its tasks (at least one) run, and return its
        :meth:`status`. Raises RuntimeError, with the failed task's stack trace, when the
        connector or a task has failed, and on time-out."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while True:
            if self.pid is None:
                raise RuntimeError(f"Kafka Connect is not running\n{self._log_tail()}")
            try:
                last = self.status(name)
            except urllib.error.HTTPError as e:
                if e.code != 404:  # 404: not created yet
                    raise
            except (OSError, ValueError):
                pass
            else:
                states = [last["connector"]["state"]] + [t["state"] for t in last["tasks"]]
                if "FAILED" in states:
                    traces = [t.get("trace", "") for t in [last["connector"], *last["tasks"]] if t["state"] == "FAILED"]
                    raise RuntimeError(f"connector {name} failed:\n" + "\n".join(traces))
                if last["tasks"] and set(states) == {"RUNNING"}:
                    return last
            if time.monotonic() >= deadline:
                raise RuntimeError(f"connector {name} not running after {timeout_s} s: {last}\n{self._log_tail()}")
            time.sleep(0.2)

    def wait_snapshot_done(self, name: str, timeout_s: float = 120) -> dict:
        """Wait until Debezium connector ``name`` has finished its snapshot and every snapshot
        record is in Kafka, and return the flushed offset that says so.

        Debezium's offset carries ``snapshot_completed: true`` from the last snapshot record on,
        and no ``snapshot`` key once it streams; the worker flushes an offset only after the
        broker has acknowledged its record (within ``OFFSET_FLUSH_INTERVAL_MS``). A snapshot
        that writes no record (no table, or only empty ones) leaves no offset, so this waits in
        vain for it: wait for the connector's replication slot to exist instead
        (``pg_replication_slots``; the snapshot reads the database as of the slot's creation,
        so a change committed after it is streamed). Raises RuntimeError when the connector
        fails and on time-out."""
        deadline = time.monotonic() + timeout_s
        self.wait_running(name, timeout_s)
        while True:
            for entry in self.offsets(name):
                offset = entry["offset"]
                if offset.get("snapshot_completed") or "snapshot" not in offset:
                    return offset
            if time.monotonic() >= deadline:
                raise RuntimeError(f"connector {name}: no offset of a completed snapshot after {timeout_s} s "
                                   f"({self.offsets(name)})\n{self._log_tail()}")
            self.wait_running(name, max(0.0, deadline - time.monotonic()))  # raises if it failed meanwhile
            time.sleep(0.2)
