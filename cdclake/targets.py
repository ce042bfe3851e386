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
