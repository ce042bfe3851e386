"""A real Apache Kafka broker for development and tests: one node in KRaft mode (broker and
controller in the same JVM), listening on 127.0.0.1 only, run from the jars that ``bin/setup``
copies from Maven Central into ``.jars/kafka`` (version ``KAFKA_BROKER_VERSION`` in
``cdclake/versions.py``).

Everything the broker owns lives in one home folder::

    <home>/server.properties   written on every start
    <home>/controller.port     the controller (KRaft quorum) port, kept so a restart reuses it
    <home>/data/               the log dirs (topics, metadata log); formatted on first start only
    <home>/broker.log          the JVM's stdout and stderr, appended to on every start
    <home>/broker.pid          the JVM's pid while it runs (also its process group id)

The data folder outlives :meth:`KafkaBroker.stop`, so a restarted broker serves the records it
had. The broker runs without a logging backend (the jar set has none), so ``broker.log`` holds
little more than the JVM's own messages.

From a shell (``bin/kafka`` wraps this)::

    python -m cdclake.testing.kafka_broker start|stop|status

uses port ``$CDCLAKE_KAFKA_PORT`` (default 9092) and the home folder ``<repo>/.kafka``.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterable, Optional, Union

from cdclake.testing.processes import free_port, jvm_alive, running_pid, stop_group  # noqa: F401  (free_port: used by tests)
from cdclake.testing.processes import java as processes_java

REPO = Path(__file__).resolve().parents[2]
#: where ``bin/setup`` puts the broker's jars
DEFAULT_JARS = REPO / ".jars" / "kafka"
#: the home folder of the broker started by ``bin/kafka``
DEFAULT_HOME = REPO / ".kafka"
DEFAULT_PORT = 9092
#: JVM options of the broker: a development broker needs little heap
JVM_OPTS = ["-Xmx512m", "-Xms64m", "-Djava.awt.headless=true"]

#: a record for :meth:`KafkaBroker.produce`: ``(key, value)`` or ``(key, value, partition)``
Record = Union[
    tuple[Optional[bytes], Optional[bytes]],
    tuple[Optional[bytes], Optional[bytes], Optional[int]],
    tuple[Optional[bytes], Optional[bytes], Optional[int], list[tuple[str, Optional[bytes]]]],
]



def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _quiet_config(bootstrap: str) -> dict:
    """librdkafka settings shared by the admin client and the producer: IPv4 only, short
    reconnect back-off (the default grows to 10 s, which would delay noticing a fresh broker),
    and no log lines on stderr for the refused connections while the broker starts."""
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "log_level": 0,
    }


def _kafka():
    """The confluent_kafka module, with a hint when the ``kafka`` extra is not installed."""
    try:
        import confluent_kafka
        import confluent_kafka.admin  # noqa: F401 - a submodule, not imported by the package
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("confluent-kafka is not installed: run bin/setup --test (the 'kafka' extra)") from e
    return confluent_kafka


class KafkaBroker:
    """One Kafka broker (KRaft, single node) on ``127.0.0.1:port`` with its state in ``home``.

    ``jars`` is the folder of the broker's jars (``bin/setup`` fills ``<repo>/.jars/kafka``).
    A :class:`KafkaBroker` for a home folder whose broker another process started (``bin/kafka
    start``) can :meth:`stop` or :meth:`kill` it: the pid is read from ``broker.pid``.
    """

    def __init__(self, home: Path, port: int, jars: Path = DEFAULT_JARS):
        self.home = Path(home).resolve()
        self.port = int(port)
        self.jars = Path(jars).resolve()
        self._proc: Optional[subprocess.Popen] = None

    # -- paths and addresses ---------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value for clients: ``"127.0.0.1:PORT"``."""
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_path(self) -> Path:
        return self.home / "broker.log"

    @property
    def pid_path(self) -> Path:
        return self.home / "broker.pid"

    @property
    def properties_path(self) -> Path:
        return self.home / "server.properties"

    def __repr__(self) -> str:
        return f"KafkaBroker({self.bootstrap}, home={self.home})"

    # -- process state ---------------------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        """The pid of this home's running broker, or None when none runs (a stale pid file is
        ignored)."""
        return running_pid(self._proc, lambda: int(self.pid_path.read_text().strip()), self._is_our_broker)

    def is_running(self) -> bool:
        """Whether this home's broker process is alive (it may still be starting)."""
        return self.pid is not None

    def _is_our_broker(self, pid: int) -> bool:
        """Whether ``pid`` is alive and is the broker JVM of this home (:func:`jvm_alive`)."""
        return jvm_alive(pid, b"kafka.Kafka", str(self.properties_path).encode())

    def configured_port(self) -> Optional[int]:
        """The client port in this home's ``server.properties`` (that of the broker started
        last), or None when there is none."""
        try:
            for line in self.properties_path.read_text().splitlines():
                if line.startswith("advertised.listeners="):
                    return int(line.rsplit(":", 1)[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def answers(self, timeout_s: float = 2.0) -> bool:
        """Whether a broker on :attr:`bootstrap` answers a metadata request within ``timeout_s``
        seconds."""
        return self._metadata_ok(self._admin(), timeout_s)

    # -- start and stop --------------------------------------------------------------------

    def start(self, timeout_s: float = 60) -> "KafkaBroker":
        """Start the broker and return once it answers a metadata request on :attr:`bootstrap`.

        Writes ``server.properties``, formats the data folder when it has no ``meta.properties``
        (first start only), and runs ``java ... kafka.Kafka`` in a session of its own (so Ctrl-C
        in the terminal that started it does not reach it). If this home's broker already runs
        on this port, only waits for it to answer. Raises RuntimeError, with the end of
        ``broker.log``, when the jars or java are missing, a port is taken, this home's broker
        runs on another port, the JVM exits, or it does not answer within ``timeout_s`` seconds
        (a JVM this call started is then stopped).
        """
        t0 = time.monotonic()
        if self.is_running():  # started before (maybe by another process): not ours to stop
            running_port = self.configured_port()
            if running_port is not None and running_port != self.port:
                raise RuntimeError(f"the Kafka broker of {self.home} already runs on port {running_port}, "
                                   f"not {self.port}: stop it first")
            self._wait_ready(t0 + timeout_s)
            return self
        java = processes_java("Kafka broker")
        self._check_jars()
        self.home.mkdir(parents=True, exist_ok=True)
        if not _port_is_free(self.port):
            raise RuntimeError(f"cannot start Kafka broker: port {self.port} on 127.0.0.1 is in use")
        cport = self._controller_port()
        self._write_properties(cport)
        if not (self.data_dir / "meta.properties").exists():
            self._format(java)

        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting Kafka broker on {self.bootstrap}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [java, *JVM_OPTS, "-cp", self._classpath(), "kafka.Kafka", str(self.properties_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.home,
                start_new_session=True,
            )
        self.pid_path.write_text(f"{self._proc.pid}\n")
        try:
            self._wait_ready(t0 + timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop the broker: SIGTERM to its process group (the broker shuts down cleanly), and
        SIGKILL if it still runs after ``timeout_s`` seconds. Returns once it is gone; does
        nothing when it does not run. Works for a broker started by another process (pid file)."""
        self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        """SIGKILL the broker's process group at once, as a crash would (for crash tests); the
        data folder is left as the crash leaves it."""
        self._signal_and_wait(signal.SIGKILL, 0)

    def restart(self, timeout_s: float = 60) -> "KafkaBroker":
        """:meth:`stop` then :meth:`start` (same ports, same data)."""
        self.stop()
        return self.start(timeout_s=timeout_s)

    def _signal_and_wait(self, sig: int, timeout_s: float) -> None:
        stop_group(self._proc, self.pid, sig, timeout_s, self._is_our_broker, "Kafka broker")
        self._proc = None
        self.pid_path.unlink(missing_ok=True)

    # -- start-up pieces -------------------------------------------------------------------


    def _check_jars(self) -> None:
        if not any(self.jars.glob("kafka_*.jar")):
            raise RuntimeError(f"Kafka broker jars not found in {self.jars}: run bin/setup")

    def _classpath(self) -> str:
        return str(self.jars / "*")

    def _controller_port(self) -> int:
        """The controller port remembered in the home folder, or a new free one (also when the
        remembered one is taken now: the static quorum only names node ids, so it may move)."""
        f = self.home / "controller.port"
        try:
            port = int(f.read_text().strip())
            if port != self.port and _port_is_free(port):
                return port
        except (OSError, ValueError):
            pass
        port = free_port()
        while port == self.port:
            port = free_port()
        f.write_text(f"{port}\n")
        return port

    def _write_properties(self, controller_port: int) -> None:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            # one broker: every internal topic has one replica
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            # consumers of a new group get their partitions at once, not after 3 s
            "group.initial.rebalance.delay.ms": "0",
            # A restarted node's controller keeps the previous broker registration alive for one
            # broker session and refuses the new one until then (DUPLICATE_BROKER_REGISTRATION;
            # fixed in Kafka 4.1 by KAFKA-19130 for clean stops only), so a restart waited ~10 s
            # with the default 9 s session. 3 s (heartbeat every 0.5 s) brings a restart, or a
            # start after kill(), down to ~6 s and still leaves a loaded machine 6 missed
            # heartbeats before the broker is fenced.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        }
        text = "# written by cdclake.testing.kafka_broker on every start\n"
        text += "".join(f"{k}={v}\n" for k, v in props.items())
        self.properties_path.write_text(text)

    def _format(self, java: str) -> None:
        """Format the data folder for a new cluster (``kafka.tools.StorageTool format``)."""
        # base64 of a random uuid; one that starts with '-' would be read as an option
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        r = subprocess.run(
            [java, *JVM_OPTS, "-cp", self._classpath(), "kafka.tools.StorageTool", "format",
             "-t", cluster_id, "-c", str(self.properties_path)],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=self.home,
        )
        if r.returncode != 0:
            raise RuntimeError(f"formatting Kafka storage in {self.data_dir} failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")

    def _wait_ready(self, deadline: float) -> None:
        admin = self._admin()
        while True:
            pid = self.pid
            if pid is None:
                code = self._proc.returncode if self._proc is not None else None
                raise RuntimeError(f"Kafka broker exited during start-up (exit code {code})\n{self._log_tail()}")
            if self._metadata_ok(admin, min(2.0, max(0.1, deadline - time.monotonic()))):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"Kafka broker on {self.bootstrap} did not answer in time (pid {pid})\n{self._log_tail()}")
            time.sleep(0.1)

    @staticmethod
    def _metadata_ok(admin, timeout_s: float) -> bool:
        try:
            md = admin.list_topics(timeout=timeout_s)
        except _kafka().KafkaException:
            return False
        return bool(md.brokers)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.log_path})"
        return f"last lines of {self.log_path}:\n" + "\n".join("  " + line for line in tail)

    # -- clients ---------------------------------------------------------------------------

    def _admin(self):
        return _kafka().admin.AdminClient(_quiet_config(self.bootstrap))

    def create_topic(self, name: str, partitions: int = 1, timeout_s: float = 30) -> str:
        """Create topic ``name`` with ``partitions`` partitions (one replica) and return its name
        once every partition has a leader (so producers and consumers can use it at once)."""
        ck = _kafka()
        admin = self._admin()
        fut = admin.create_topics([ck.admin.NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout_s)[name]
        fut.result(timeout=timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            t = admin.list_topics(topic=name, timeout=timeout_s).topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions \
                    and all(p.leader >= 0 for p in t.partitions.values()):
                return name
            if time.monotonic() >= deadline:
                raise RuntimeError(f"topic {name} has no leader for all {partitions} partitions after {timeout_s} s")
            time.sleep(0.05)

    def produce(self, topic: str, records: Iterable[Record], timeout_s: float = 30) -> int:
        """Write ``records`` to ``topic`` and return how many were written, once all are
        acknowledged (``acks=all``, idempotent producer: each record is written once, also when
        the broker restarts meanwhile). A record is ``(key, value)``, ``(key, value, partition)``
        or ``(key, value, partition, headers)`` with bytes or None for key and value; without a
        partition (None) the producer picks one from the key; headers: ``[(name, bytes | None)]``. Raises RuntimeError on the first delivery error or when not all records are
        acknowledged within ``timeout_s`` seconds."""
        ck = _kafka()
        # idempotent: a batch resent after a lost acknowledgement (say, across a broker
        # restart) is written once, and each partition keeps the order of ``records``
        producer = ck.Producer({**_quiet_config(self.bootstrap), "enable.idempotence": True, "linger.ms": 5})
        errors: list[str] = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        n = 0
        for rec in records:
            key, value = rec[0], rec[1]
            kwargs = {"partition": rec[2]} if len(rec) > 2 and rec[2] is not None else {}
            if len(rec) > 3 and rec[3]:
                kwargs["headers"] = list(rec[3])
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery, **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.1)
            n += 1
        left = producer.flush(timeout_s)
        if errors:
            raise RuntimeError(f"{len(errors)} of {n} records to {topic} not delivered, first: {errors[0]}")
        if left:
            raise RuntimeError(f"{left} of {n} records to {topic} not acknowledged within {timeout_s} s")
        return n


def main(argv: Optional[list[str]] = None) -> int:
    """``start | stop | status`` of the broker in ``<repo>/.kafka`` on ``$CDCLAKE_KAFKA_PORT``."""
    argv = sys.argv[1:] if argv is None else argv
    cmd = argv[0] if len(argv) == 1 else None
    if cmd not in ("start", "stop", "status"):
        print("usage: bin/kafka start|stop|status  (port: $CDCLAKE_KAFKA_PORT, default 9092)", file=sys.stderr)
        return 2
    try:
        port = int(os.environ.get("CDCLAKE_KAFKA_PORT", DEFAULT_PORT))
    except ValueError:
        print(f"kafka: CDCLAKE_KAFKA_PORT is not a port number: {os.environ['CDCLAKE_KAFKA_PORT']!r}", file=sys.stderr)
        return 2
    broker = KafkaBroker(DEFAULT_HOME, port)
    if cmd == "start":
        was_running = broker.is_running()
        t0 = time.monotonic()
        try:
            broker.start()
        except RuntimeError as e:
            print(f"kafka: {e}", file=sys.stderr)
            return 1
        what = "already running" if was_running else f"started in {time.monotonic() - t0:.1f} s"
        print(f"kafka: broker {what} on {broker.bootstrap} (pid {broker.pid}, home {broker.home})")
    elif cmd == "stop":
        pid = broker.pid
        if pid is None:
            print("kafka: broker not running")
        else:
            broker.stop()
            print(f"kafka: broker stopped (pid {pid})")
    else:
        pid = broker.pid
        if pid is None:
            print("kafka: broker not running")
            return 1
        broker.port = broker.configured_port() or port  # it may run on another port than asked
        state = "answers" if broker.answers() else "does not answer"
        print(f"kafka: broker running (pid {pid}, home {broker.home}); {broker.bootstrap} {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
