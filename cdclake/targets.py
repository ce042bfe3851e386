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
import re
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
    ``_cdclake/progress``).
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
            jvm = spark.sparkContext._jvm
            self._jpath = jvm.org.apache.hadoop.fs.Path
            self._fs = self._jpath(self.target).getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def path(self, rel: str = "") -> str:
        return join(self.target, rel) if rel else self.target

    def exists(self, rel: str = "") -> bool:
        if self.uri:
            return bool(self._fs.exists(self._jpath(self.path(rel))))
        return Path(self.path(rel)).exists()

    def has_entries(self, rel: str) -> bool:
        """True when the folder ``rel`` exists and holds anything."""
        if not self.exists(rel):
            return False
        if self.uri:
            return len(self._fs.listStatus(self._jpath(self.path(rel)))) > 0
        return any(Path(self.path(rel)).iterdir())

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
