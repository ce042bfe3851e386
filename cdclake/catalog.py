"""Target tables by name: each table cdclake writes registered in the Spark session's catalog as
an external Delta table at its folder (``--catalog-database``), so a user queries
``spark.table("shop.orders")`` or ``SELECT * FROM shop.orders`` in ``spark-sql``.

Which catalog is the session's: Spark's Hive support with an embedded Derby metastore in a folder
(:func:`metastore_conf`, ``cdclake ingest --metastore DIR``: by default
``<target>/_cdclake/metastore``), or whatever the Spark configuration names (a Hive metastore
service ``spark.hadoop.hive.metastore.uris``, AWS Glue's client factory, Unity Catalog): cdclake
only issues ``CREATE DATABASE IF NOT EXISTS`` / ``CREATE TABLE IF NOT EXISTS ... USING DELTA
LOCATION`` / ``DROP TABLE`` (external tables: the folder is never touched by it).

Kept in step: a new table is registered after the batch that created it; a schema change needs
nothing (Spark's Delta catalog reads a table's schema from its log); a table rename at the source
(the table moves to a new folder) drops the old name's entry and registers the new one.
"""

from __future__ import annotations

import threading

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdclake import targets
from cdclake.apply.tasks import table_path
from cdclake.errors import CdclakeError
from cdclake.routing import Routing
from cdclake.sqltext import quote_ident, sql_str

#: the folder of the embedded metastore under a target, when ``--metastore`` names none
DEFAULT_METASTORE = "_cdclake/metastore"

_DONE: set[tuple[str, str, str]] = set()
#: set once this process has reached the metastore (:func:`connect`)
_CONNECTED = threading.Event()
_LOCK = threading.Lock()


def metastore_conf(folder: str, java_options: str) -> dict[str, str]:
    """Spark settings for Hive support with an embedded Derby metastore in local ``folder``
    (created when missing: ``metastore_db/``, ``derby.log``, ``warehouse/``). ``java_options``:
    the driver JVM options to keep (Derby's home is added to them). The same settings open the
    catalog from another session (``spark-sql --conf ...``; docs/tables.md). Derby's home (its
    ``derby.log``) is ``folder`` unless the folder's path holds white space.

    Raises:
        CdclakeError(BAD_OPTION): ``folder`` is a URI (a target on object storage needs
            ``--metastore`` or a catalog of the Spark configuration).
    """
    if targets.is_uri(folder):
        raise CdclakeError("BAD_OPTION", f"the embedded metastore needs a local folder, not {folder}: give --metastore DIR"
                                         " (or name a catalog in CDCLAKE_SPARK_CONF)")
    folder = targets.resolve(folder)
    home = "" if any(c.isspace() for c in folder) else f" -Dderby.system.home={folder}"  # (Java options split on spaces)
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={folder}/metastore_db;create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.sql.warehouse.dir": f"{folder}/warehouse",
        "spark.driver.extraJavaOptions": f"{java_options}{home}",
    }


def connect(spark: SparkSession) -> None:
    """Reach the session's catalog once per process (``SHOW DATABASES``), before a batch
    writes: a metastore that cannot be opened (another process holds the embedded Derby
    database) stops the run before it writes, not after."""
    if not _CONNECTED.is_set():
        spark.sql("SHOW DATABASES").collect()
        _CONNECTED.set()


def _location(spark: SparkSession, name: str) -> str | None:
    """The location of catalog table ``name`` (quoted ``db.table``), None when it has none."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect():
        if (row["col_name"] or "").strip() == "Location":
            return (row["data_type"] or "").strip()
    return None


def _same_place(a: str, b: str) -> bool:
    """Locations ``a`` and ``b`` are one folder (``file:/x``, ``file:///x`` and ``/x`` are)."""
    def bare(p: str) -> str:
        return (p[len("file:"):] if p.startswith("file:") else p).strip("/")

    return bare(a) == bare(b)


def ensure(spark: SparkSession, database: str, table: str, path: str) -> None:
    """Register the Delta table at ``path`` as catalog table ``database.table`` (an external
    table), creating the catalog database when missing; nothing when this process did it
    already.

    Raises:
        CdclakeError(CATALOG_CONFLICT): ``database.table`` exists at another location (two
            source tables mapped to one name, or a table of someone else's).
    """
    key = (database, table, path)
    if key in _DONE:
        return
    name = f"{quote_ident(database)}.{quote_ident(table)}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {quote_ident(database)}")
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION {sql_str(path)}")
    found = _location(spark, name)
    if found is None or not _same_place(found, path):
        raise CdclakeError("CATALOG_CONFLICT", f"catalog table {database}.{table} is at {found}, not at {path}: two source"
                                               " tables map to one name (see --table-name), or the name is taken")
    with _LOCK:
        _DONE.add(key)


def drop(spark: SparkSession, database: str, table: str, path: str) -> None:
    """Remove catalog table ``database.table`` when it is the external table at ``path`` (its
    folder stays as it is); nothing when it is not there or is another table."""
    name = f"{quote_ident(database)}.{quote_ident(table)}"
    if spark.catalog.databaseExists(database) and spark.catalog.tableExists(name):
        found = _location(spark, name)
        if found is not None and _same_place(found, path):
            spark.sql(f"DROP TABLE IF EXISTS {name}")
    with _LOCK:
        _DONE.discard((database, table, path))


def register(spark: SparkSession, routing: Routing, target: str, names: list[str], renames: list) -> None:
    """Keep the catalog in step with a batch: each table of ``names`` (source names, applied
    by the batch) registered (:func:`ensure`) once it has a Delta table, and for each rename of
    ``renames`` (:class:`cdclake.apply.plan.TableRename`) the old name's entry dropped
    (:func:`drop`) and the new name's registered. Catalog calls only for a table this process
    has not registered yet."""
    for r in renames:
        old = routing.catalog_name(r.old_name)
        # only a rename that was applied (its new table is there) moves the entry
        if old is not None and DeltaTable.isDeltaTable(spark, table_path(target, r.new_name)):
            drop(spark, *old, table_path(target, r.old_name))
    gone = {r.old_name for r in renames} - {r.new_name for r in renames}
    for name in dict.fromkeys([*(n for n in names if n not in gone), *(r.new_name for r in renames)]):
        where = routing.catalog_name(name)
        path = table_path(target, name)
        if where is not None and (*where, path) not in _DONE and DeltaTable.isDeltaTable(spark, path):
            ensure(spark, *where, path)
