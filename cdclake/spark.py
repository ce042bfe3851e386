"""The one SparkSession factory.

``get_spark()`` returns the active session or builds one: ``local[*]`` by default (the embedded
default), any master when given (``spark://``, ``yarn``, ``local[2]`` ...). The session carries the
Delta Lake extension and catalog, the jars fetched by ``bin/setup`` (Delta, spark-avro,
spark-sql-kafka and kafka-clients) as ``spark.jars``, and UTC as the session time zone: every
timestamp cdclake writes is UTC.

Environment:
    CDCLAKE_JARS_DIR   folder of jars to hand to Spark (default: ``<repo>/.jars/spark``)
    CDCLAKE_SPARK_MASTER   master URL used when none is passed (default ``local[*]``)
    CDCLAKE_DRIVER_MEMORY  ``spark.driver.memory`` in local mode (default ``6g``)
    CDCLAKE_SPARK_CONF     more Spark settings, ``key=value`` pairs separated by white space
                           (applied after cdclake's own, before ``conf``)
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from cdclake.errors import CdclakeError
from cdclake.versions import DELTA_VERSION, SPARK_VERSION

_REPO = Path(__file__).resolve().parent.parent


def jars_dir() -> Path:
    """The folder whose ``*.jar`` files are put on Spark's class path."""
    return Path(os.environ.get("CDCLAKE_JARS_DIR", _REPO / ".jars" / "spark"))


def spark_jars() -> list[str]:
    """Absolute paths of the jars for ``spark.jars``.

    Raises:
        CdclakeError(JARS_MISSING): the jar folder is empty (``bin/setup`` was not run).
    """
    found = sorted(glob.glob(str(jars_dir() / "*.jar")))
    if not any("delta-spark" in Path(j).name for j in found):
        raise CdclakeError(
            "JARS_MISSING",
            f"no Delta jars in {jars_dir()}: run bin/setup (it fetches them from Maven Central)",
        )
    return found


def env_conf() -> dict[str, str]:
    """Spark settings from ``$CDCLAKE_SPARK_CONF`` (``key=value`` pairs separated by white space).

    Raises:
        CdclakeError(BAD_OPTION): a pair without ``=``.
    """
    out = {}
    for pair in os.environ.get("CDCLAKE_SPARK_CONF", "").split():
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise CdclakeError("BAD_OPTION", f"CDCLAKE_SPARK_CONF: expected key=value, got {pair!r}")
        out[key] = value
    return out


#: Avro's own bounds (Avro 1.12 ``SystemLimitException``; JVM-wide, read once): a damaged
#: DTS datum may declare a string, bytes or array length of gigabytes, which Avro allocates
#: before it reads, and the JVM died of ``OutOfMemoryError`` (found by ``bench/fuzz.py``).
#: No field of one record is longer than the record; beyond these the datum fails to decode
#: (``from_avro`` PERMISSIVE: ``AVRO_DECODE_ERROR``). 64 MiB is above ``--max-record-bytes``'s
#: default (16 MiB).
AVRO_LIMITS = " ".join(
    f"-Dorg.apache.avro.limits.{name}.maxLength={n}"
    for name, n in (("string", 64 * 1024 * 1024), ("bytes", 64 * 1024 * 1024), ("collectionItems", 1_000_000))
)


#: the driver JVM's options (``spark.driver.extraJavaOptions``): log level and :data:`AVRO_LIMITS`;
#: a caller that sets its own should keep these
DRIVER_JAVA_OPTIONS = f"-Dlog4j2.level=WARN {AVRO_LIMITS}"


def get_spark(master: str | None = None, app_name: str = "cdclake", conf: dict | None = None):
    """Return the active SparkSession, or build the cdclake one.

    Args:
        master: Spark master URL; default ``$CDCLAKE_SPARK_MASTER`` or ``local[*]``.
        app_name: the application name shown by Spark.
        conf: extra Spark settings, applied last.

    Raises:
        CdclakeError(VERSION_MISMATCH): the installed pyspark is not the pinned version.
        CdclakeError(JARS_MISSING): see :func:`spark_jars`.
    """
    import pyspark
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if pyspark.__version__ != SPARK_VERSION:
        raise CdclakeError(
            "VERSION_MISMATCH",
            f"pyspark {pyspark.__version__} is installed but cdclake pins {SPARK_VERSION} "
            f"(Delta {DELTA_VERSION}): run bin/setup",
        )
    master = master or os.environ.get("CDCLAKE_SPARK_MASTER", "local[*]")
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the embedded default stays on loopback
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        # local mode runs everything in the driver JVM, whose default heap (1 GiB) is too small
        # to persist a batch of a million decoded records; ignored when the JVM already runs
        .config("spark.driver.memory", os.environ.get("CDCLAKE_DRIVER_MEMORY", "6g"))
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("CDCLAKE_SHUFFLE_PARTITIONS", "8"))
        .config("spark.databricks.delta.snapshotPartitions", "1")
        # MERGE sources are projections of a persisted batch of events, deterministic when
        # recomputed, so Delta need not materialise them a second time (halves MERGE time).
        .config("spark.databricks.delta.merge.materializeSource", "none")
        .config("spark.databricks.delta.schema.autoMerge.enabled", "false")
        # the applier persists its MERGE sources (shuffled by key); without this, adaptive
        # execution keeps their 8 shuffle partitions even for a batch of a few hundred events,
        # and each task pays the fold's fixed cost: a 151-column table's partial-update batch
        # took 17-20 s, 13 s with it (bench/wide_table.py; NOTES.md session 17)
        .config("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "true")
        .config("spark.sql.ansi.enabled", "false")
        # lower()/upper() by the JVM's case mapping (Spark 3's), not ICU's: Spark 4.0's first
        # ICU case mapping in a JVM builds a table over every code point (the static
        # initialiser of CollationAwareUTF8String), ~1.7 s of CPU that every cold decode paid
        # (canal's upper(type), dataworks' lower(dbType), the boolean conversions; Java Flight
        # Recorder, session 53: a first lower/upper 2.11 s with ICU, 0.49 s without)
        .config("spark.sql.icu.caseMappings.enabled", "false")
        # explode(events) makes Spark infer a size(events) > 0 filter and push it through the
        # decoder's projections, where it inlines the whole decode expression (from_json once per
        # reference): decoding ran ~10 times slower. The decoders' outputs are exploded unfiltered.
        .config("spark.sql.optimizer.excludedRules", "org.apache.spark.sql.catalyst.optimizer.InferFiltersFromGenerate")
        .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
        .config("spark.executor.extraJavaOptions", AVRO_LIMITS)
    )
    for key, value in {**env_conf(), **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
