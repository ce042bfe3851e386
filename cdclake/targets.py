"""Where a target lives: a local folder, or a URI of a Hadoop file system (``s3a://bucket/lake``,
``abfss://container@account.dfs.core.windows.net/lake``, ``gs://``, ``hdfs://``, ``file:/``).

Delta reads and writes both kinds through Hadoop's FileSystem; the few files cdclake itself
touches beside the Delta tables (``_cdclake/layout.json``, the write probe) go through
:class:`TargetFiles`: Python's file operations for a local folder, Hadoop's FileSystem of the
running Spark session for a URI (so a URI target needs the session, and the file system's
jars and credentials in its configuration: ``hadoop-aws`` for ``s3a``, ``hadoop-azure`` for
``abfss``; see README "On a cluster").
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

from cdclake.errors import CdclakeError

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:/")


def is_uri(target: str) -> bool:
    """True for ``scheme:/...`` (``s3a://b/x``, ``file:/tmp/x``), False for a local path."""
    return bool(_URI.match(target))


def resolve(target: str) -> str:
    """The target's canonical spelling: a URI without its trailing ``/``, a local path made
    absolute."""
    return target.rstrip("/") if is_uri(target) else str(Path(target).resolve())


def join(target: str, *parts: str) -> str:
    """``target/part/...`` for both kinds (a URI's ``//`` is kept, unlike ``pathlib``)."""
    return "/".join([target.rstrip("/"), *parts]) if is_uri(target) else str(Path(target).joinpath(*parts))


#: characters a table's folder name never holds as themselves: path separators, ``^`` (the
#: escape), ``%`` (delta-rs percent-decodes local paths: a folder ``a%2Fb`` opens ``a/b``),
#: Hadoop's scheme and glob characters, ``~`` (marks a shortened name), control characters
#: (NUL, newline ...; any character Python does not call printable, so no bidi override or
#: zero-width character hides in a folder name) and those Windows file systems refuse
_UNSAFE = frozenset('^%/\\:*?"<>|{}[]~')
#: longest folder name (UTF-8 bytes) kept whole; most file systems allow 255
MAX_FOLDER_BYTES = 200
AUDIT_FOLDER = "_cdclake"


def _escape(ch: str) -> str:
    return "".join(f"^{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))


def table_folder(name: str) -> str:
    r"""The folder name, under a target, of the Delta table of source table ``name`` (its
    qualified name, ``db.table`` or ``db.schema.table``, dots kept).

    Ordinary names are their own folder (``inventory.customers``). Anything that could leave
    the target or collide is percent-encoded (RFC 3986 style, UTF-8): ``%``, ``/``, ``\``,
    ``:``, ``~``, glob and Windows-reserved characters, control characters and NUL, a leading
    ``.`` (so ``..`` is ``%2E.``), and the leading ``_`` of a name starting with ``_cdclake``
    (case-insensitively, so no table meets the audit folder). The empty name is ``%``. The
    result is a single path component, never ``.``/``..``/empty, and :func:`table_name` gives
    ``name`` back.

    A name whose encoding is longer than :data:`MAX_FOLDER_BYTES` UTF-8 bytes keeps its first
    part (under that size) and ends with ``~`` and 16 hex digits of the SHA-256 of ``name``:
    still unique, but :func:`table_name` cannot reverse it (the table's name is kept in
    the progress, :mod:`cdclake.apply.audit`).
    """
    if name == "":
        return "^"
    out = "".join(_escape(c) if c in _UNSAFE or not c.isprintable() else c for c in name)
    if out.startswith("."):
        out = "^2E" + out[1:]
    elif out.lower().startswith(AUDIT_FOLDER):
        out = "^5F" + out[1:]
    raw = out.encode("utf-8")
    if len(raw) <= MAX_FOLDER_BYTES:
        return out
    head = raw[: MAX_FOLDER_BYTES - 17].decode("utf-8", "ignore")
    head = re.sub(r"\^[0-9A-F]?$", "", head)  # never cut an escape in two
    return head + "~" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def table_name(folder: str) -> str | None:
    """The source table name of a folder made by :func:`table_folder`; None for a shortened
    (``~``) name."""
    if "~" in folder:
        return None
    if folder == "^":
        return ""
    raw = re.sub(rb"\^([0-9A-F]{2})", lambda m: bytes([int(m.group(1), 16)]), folder.encode("utf-8", "surrogatepass"))
    return raw.decode("utf-8", "surrogatepass")


def hadoop_fs(spark, path: str):
    """``(file system, path)``: the Hadoop FileSystem of the running session that holds
    ``path`` (any scheme, or a local path), and ``path`` as a Hadoop ``Path``."""
    jpath = spark.sparkContext._jvm.org.apache.hadoop.fs.Path(path)
    return jpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jpath


class TargetFiles:
    """Small files under a target, local or on a Hadoop file system.

    ``target``: as the user gave it (see :func:`resolve`); ``spark``: the session whose Hadoop
    configuration opens a URI target (None for local paths; a URI without it raises
    ValueError).
    """

    def __init__(self, target: str, spark=None) -> None:
        self.target = resolve(target)
        self.uri = is_uri(target)
        if self.uri:
            if spark is None:
                raise ValueError(f"a Spark session is needed to open {target}")
            self._jpath = spark.sparkContext._jvm.org.apache.hadoop.fs.Path
            self._fs, _ = hadoop_fs(spark, self.target)

    def path(self, rel: str = "") -> str:
        return join(self.target, rel) if rel else self.target

    def exists(self, rel: str = "") -> bool:
        if self.uri:
            return bool(self._fs.exists(self._jpath(self.path(rel))))
        return Path(self.path(rel)).exists()

    def has_entries(self, rel: str, ignore: frozenset[str] = frozenset()) -> bool:
        """True when the folder ``rel`` exists and holds anything but the names in ``ignore``."""
        if not self.exists(rel):
            return False
        if self.uri:
            return any(st.getPath().getName() not in ignore for st in self._fs.listStatus(self._jpath(self.path(rel))))
        return any(p.name not in ignore for p in Path(self.path(rel)).iterdir())

    def read_text(self, rel: str) -> str:
        if self.uri:
            stream = self._fs.open(self._jpath(self.path(rel)))
            try:
                return bytes(stream.readAllBytes()).decode("utf-8")
            finally:
                stream.close()
        return Path(self.path(rel)).read_text(encoding="utf-8")

    def write_text(self, rel: str, text: str) -> None:
        """Write ``rel`` (parents created), replacing it."""
        if self.uri:
            out = self._fs.create(self._jpath(self.path(rel)), True)
            try:
                out.write(bytearray(text.encode("utf-8")))
            finally:
                out.close()
            return
        p = Path(self.path(rel))
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")

    def create_new(self, rel: str, text: str) -> bool:
        """Create ``rel`` holding ``text`` only if it does not exist (atomic on a local or
        HDFS file system: ``O_EXCL`` / ``create(overwrite=false)``); False when it exists."""
        if self.uri:
            jp = self._jpath(self.path(rel))
            try:
                out = self._fs.create(jp, False)
            except Exception as e:  # py4j: FileAlreadyExistsException
                if self._fs.exists(jp):
                    return False
                raise e
            try:
                out.write(bytearray(text.encode("utf-8")))
            finally:
                out.close()
            return True
        p = Path(self.path(rel))
        p.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        return True

    def delete(self, rel: str) -> None:
        """Remove the file ``rel`` (nothing when it is not there)."""
        if self.uri:
            self._fs.delete(self._jpath(self.path(rel)), False)
        else:
            Path(self.path(rel)).unlink(missing_ok=True)

    def delete_tree(self, rel: str) -> None:
        """Remove the folder ``rel`` with everything in it (nothing when it is not there)."""
        if self.uri:
            self._fs.delete(self._jpath(self.path(rel)), True)
        else:
            shutil.rmtree(self.path(rel), ignore_errors=True)

    def check_writable(self) -> None:
        """Create the target folder if needed and write, then delete, a probe file in it.

        Raises:
            CdclakeError(TARGET_NOT_WRITABLE): it cannot be created or written.
        """
        probe = f".cdclake-write-test-{uuid.uuid4().hex}"
        try:
            if self.uri:
                self._fs.mkdirs(self._jpath(self.target))
                self.write_text(probe, "ok")
                self._fs.delete(self._jpath(self.path(probe)), False)
                return
            Path(self.target).mkdir(parents=True, exist_ok=True)
            self.write_text(probe, "ok")
            Path(self.path(probe)).unlink()
        except OSError as e:
            raise CdclakeError("TARGET_NOT_WRITABLE", f"cannot write to target {self.target}: {e.strerror or e}") from None
        except Exception as e:  # py4j: the file system's own error
            java = getattr(e, "java_exception", None)
            if java is None:
                raise
            raise CdclakeError("TARGET_NOT_WRITABLE", f"cannot write to target {self.target}: {java.toString()}") from None


#: the lock file of the process writing a target
LOCK_FILE = "_cdclake/writer.lock"
#: a lock of another host whose heartbeat is older than this is taken over (ms)
LOCK_STALE_MS = 10 * 60 * 1000
#: how often the holder refreshes its heartbeat (s)
LOCK_HEARTBEAT_S = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLock:
    """One writer per target: held for a whole ingest (a file ingest, or a stream for its whole
    run), as ``_cdclake/writer.lock`` (JSON: ``pid``, ``host``, ``id``, ``started_ms``,
    ``heartbeat_ms``), created atomically.

    Why: a batch reads the target's state (the progress its changelog carries: the latest truncate and
    delete of each table) at its start and relies on it at its commits. Delta's optimistic
    concurrency checks each table's own commits, not that state, so two writers at once can
    both commit and leave rows a truncate or a delete of the other had removed (measured: two
    concurrent ingests of simulated Canal files left 7 rows too many). So a second writer is
    refused: ``CdclakeError(TARGET_LOCKED)``.

    A lock left by a process that died (kill -9) is taken over: on the same host when its pid
    is gone, from another host when its heartbeat (refreshed every
    :data:`LOCK_HEARTBEAT_S` s by a daemon thread) is older than :data:`LOCK_STALE_MS`. The
    same process may take the lock again (re-entrant: a stream's batches, tests in one process).
    On an object store without atomic create-if-absent (S3 before conditional writes) two
    starts at the same moment can both win: run one writer per target there.
    """

    _held: dict[str, list] = {}
    _guard = threading.Lock()

    def __init__(self, target: str, spark=None) -> None:
        self.files = TargetFiles(target, spark)
        self.key = self.files.target

    def __enter__(self) -> "WriterLock":
        with WriterLock._guard:
            held = WriterLock._held.get(self.key)
            if held is not None:
                held[0] += 1
                return self
            self._acquire()
            stop = threading.Event()
            beat = threading.Thread(target=self._beat, args=(stop,), daemon=True, name="cdclake-lock-heartbeat")
            WriterLock._held[self.key] = [1, stop, self._me]
            beat.start()
        return self

    def __exit__(self, *exc) -> None:
        with WriterLock._guard:
            held = WriterLock._held[self.key]
            held[0] -= 1
            if held[0] > 0:
                return
            del WriterLock._held[self.key]
            held[1].set()
            try:
                if self._read() == held[2]["id"]:
                    self.files.delete(LOCK_FILE)
            except Exception:  # noqa: BLE001: a lock that cannot be removed is stale at the next start
                pass

    def _record(self) -> dict:
        now = int(time.time() * 1000)
        return {"pid": os.getpid(), "host": socket.gethostname(), "id": uuid.uuid4().hex, "started_ms": now, "heartbeat_ms": now}

    def _read(self) -> str | None:
        try:
            return json.loads(self.files.read_text(LOCK_FILE)).get("id")
        except Exception:  # noqa: BLE001
            return None

    def _acquire(self) -> None:
        self._me = self._record()
        for _ in range(3):
            if self.files.create_new(LOCK_FILE, json.dumps(self._me)):
                return
            try:
                other = json.loads(self.files.read_text(LOCK_FILE))
            except Exception:  # noqa: BLE001: unreadable (half written, or removed meanwhile)
                other = None
            if other is not None and not self._stale(other):
                raise CdclakeError(
                    "TARGET_LOCKED",
                    f"target {self.key} is being written by process {other.get('pid')} on {other.get('host')} "
                    f"(since {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(other.get('started_ms', 0) / 1000))} UTC): "
                    f"one writer per target; a lock of a process that died is taken over",
                )
            if other is None:
                time.sleep(0.2)
                if self.files.exists(LOCK_FILE):
                    try:
                        json.loads(self.files.read_text(LOCK_FILE))
                        continue  # readable now: look again
                    except Exception:  # noqa: BLE001
                        pass
            self.files.delete(LOCK_FILE)  # stale: take it over
        raise CdclakeError("TARGET_LOCKED", f"could not take the writer lock of target {self.key}")

    @staticmethod
    def _stale(other: dict) -> bool:
        if other.get("host") == socket.gethostname():
            pid = other.get("pid")
            # our own pid: a lock this process no longer holds (it would be in ``_held``)
            return not isinstance(pid, int) or pid == os.getpid() or not _alive(pid)
        return int(time.time() * 1000) - int(other.get("heartbeat_ms") or 0) > LOCK_STALE_MS

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(LOCK_HEARTBEAT_S):
            try:
                if self._read() != self._me["id"]:
                    return  # taken over (we were thought dead): stop refreshing
                self._me["heartbeat_ms"] = int(time.time() * 1000)
                self.files.write_text(LOCK_FILE, json.dumps(self._me))
            except Exception:  # noqa: BLE001: a missed heartbeat only makes the lock look older
                pass
