"""Which tables a run writes, under which names, laid out how, and tables by name in a catalog
(issue 53): ``--include-tables``/``--exclude-tables``, ``--table-name``/``--table-prefix``/
``--table-suffix``, ``--partition-by``, ``--table-property``, ``--catalog-database``.

The pure rules first (no Spark), then end to end: the example shop messages
(``examples/shop``, the README's quick start) through files and through a real Kafka broker,
then a row that an update moves to another partition, and the quick start's command with
Spark's Hive support and its embedded Derby metastore in processes of their own.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cdclake.cli import main
from cdclake.errors import CdclakeError
from cdclake.pipeline import IngestConfig, ingest
from cdclake.routing import Naming, Routing, partition_column
from tests.conftest import REPO, TEST_CONF

SHOP = REPO / "examples" / "shop"
README = REPO / "README.md"


# -- the rules --------------------------------------------------------------------------------


def test_target_names_from_a_template_a_prefix_and_a_suffix():
    assert Naming().target_name("shop.orders") == "shop.orders"
    assert Naming("{database}_{table}").target_name("shop.orders") == "shop_orders"
    assert Naming("{table}").target_name("inventory.public.customers") == "customers"
    assert Naming("{schema}.{table}").target_name("inventory.public.customers") == "public.customers"
    assert Naming(prefix="ods_").target_name("shop.orders") == "shop.ods_orders"
    assert Naming("{database}_{table}", "ods_", "_v1").target_name("shop.orders") == "shop_ods_orders_v1"
    for bad in ("{db}_{table}", "{database}", "{table"):
        with pytest.raises(CdclakeError) as e:
            Naming(bad)
        assert e.value.code == "BAD_OPTION"


def test_table_globs():
    from cdclake.apply.plan import TablePlan, choose_key
    from cdclake.routing import glob_match

    assert glob_match("shop.*", "shop.orders") and not glob_match("shop.*", "shopx.orders")
    assert glob_match("*.ord?rs", "inventory.public.orders") and not glob_match("*.ord?rs", "shop.ordrs")
    assert glob_match("a+b.(x)", "a+b.(x)") and not glob_match("a+b.(x)", "aab.x")  # no regex but * and ?
    p = TablePlan("shop", None, "orders")
    choose_key(p, {"crm.*": ["x"], "shop.*": ["order_id"]})
    assert (p.key, p.key_source) == (["order_id"], "configuration")
    p = TablePlan("shop", None, "orders")
    choose_key(p, {"shop.*": ["order_id"], "orders": ["id"]})  # a name wins over a glob
    assert p.key == ["id"]


def test_partition_expressions():
    day = partition_column("days(created_at)")
    assert (day.name, day.source, day.generated, day.spark_type) == ("created_at_day", "created_at", "CAST(`created_at` AS DATE)", "date")
    assert partition_column("months(ts)").generated == "DATE_FORMAT(`ts`, 'yyyy-MM')"
    assert partition_column("region").name == "region" and partition_column("region").generated is None
    for bad in ("bucket(4, id)", "", "days(a)(b)"):
        with pytest.raises(CdclakeError) as e:
            partition_column(bad)
        assert e.value.code == "BAD_OPTION"


def test_include_exclude_globs_and_catalog_names():
    r = Routing.of(include=[r"shop\..*", r"crm\.customers"], exclude=[r".*\.audit_.*"],
                   partition_by={"shop.*": ["days(created_at)"], "shop.orders": ["region"]},
                   properties=[("shop.*", "delta.enableChangeDataFeed", "true"), ("*.orders", "delta.appendOnly", "false")],
                   catalog_database="{database}")
    assert [n for n in ("shop.orders", "shop.audit_log", "crm.customers", "crm.leads", "shopx.orders") if r.included(n)] == [
        "shop.orders", "crm.customers"]
    # the first matching --partition-by wins; every matching --table-property applies
    assert [p.name for p in r.layout("shop.orders").partition_by] == ["created_at_day"]
    assert dict(r.layout("shop.orders").properties) == {"delta.enableChangeDataFeed": "true", "delta.appendOnly": "false"}
    assert not r.layout("crm.customers")
    assert r.catalog_name("shop.orders") == ("shop", "orders")
    assert Routing.of(naming=Naming("{database}_{table}"), catalog_database="lake").catalog_name("shop.orders") == ("lake", "shop_orders")
    assert Routing().catalog_name("shop.orders") is None
    assert not Routing().filters and Routing().included("anything")


def test_two_tables_never_share_a_target_or_catalog_name():
    from cdclake.catalog import metastore_conf
    from cdclake.routing import check_names

    check_names(Routing.of(naming=Naming("{database}_{table}")), ["shop.orders", "crm.orders"])
    for routing, names, text in [
        (Routing.of(naming=Naming("{table}")), ["shop.orders", "crm.orders"], "names both crm.orders and shop.orders orders"),
        (Routing.of(naming=Naming("{table}")), ["shop.Orders", "crm.orders"], "names both"),  # one folder where case does not count
        (Routing.of(catalog_database="lake"), ["shop.orders", "crm.orders"], "puts both crm.orders and shop.orders at lake.orders"),
        (Routing.of(catalog_database="{schema}"), ["shop.orders"], "is blank for table shop.orders"),
    ]:
        with pytest.raises(CdclakeError) as e:
            check_names(routing, names)
        assert e.value.code == "BAD_OPTION" and text in e.value.message, e.value.message
    with pytest.raises(CdclakeError) as e:
        metastore_conf("s3a://bucket/lake/_cdclake/metastore", "")
    assert e.value.code == "BAD_OPTION" and "--metastore" in e.value.message
    conf = metastore_conf("/tmp/a b/metastore", "-Dx=1")
    assert conf["spark.driver.extraJavaOptions"] == "-Dx=1" and "databaseName=/tmp/a b/metastore/metastore_db" in conf[
        "spark.hadoop.javax.jdo.option.ConnectionURL"]


@pytest.mark.parametrize("args, text", [
    (["--include-tables", "shop.("], "--include-tables 'shop.(' is not a regular expression"),
    (["--partition-by", "shop.orders=bucket(4,id)"], "--partition-by expression"),
    (["--partition-by", "shop.orders="], "is not TABLE=EXPR"),
    (["--table-property", "shop.orders=delta.appendOnly"], "is not TABLE=NAME=VALUE"),
    (["--table-name", "{db}.{table}"], "unknown field"),
    (["--metastore", "/tmp/m"], "--metastore needs --catalog-database"),
    (["--catalog-database", "{db}"], "--catalog-database '{db}'"),
])
def test_bad_table_options_stop_before_spark_in_one_line(capsys, tmp_path, args, text):
    assert main(["ingest", "--format", "canal-json", "--input", str(SHOP), "--target", str(tmp_path / "t"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cdclake: error: BAD_OPTION: ") and text in err and err.count("\n") == 1


# -- end to end ---------------------------------------------------------------------------------


def _canal(table, typ, rows, old=None, seq=100, cols=None, ddl=None):
    types = cols or {"id": "BIGINT", "customer_id": "BIGINT", "amount": "DECIMAL(10,2)", "region": "VARCHAR(16)",
                     "created_at": "DATETIME"}
    msg = {"data": rows, "database": "shop", "es": 1764470000000 + seq * 1000, "id": seq, "isDdl": ddl is not None,
           "mysqlType": types, "old": old, "pkNames": ["id"], "sql": ddl or "", "sqlType": {c: 12 for c in types},
           "table": table, "ts": 1764470000000 + seq * 1000, "type": typ}
    return json.dumps(msg)


def _later_batch(path: Path) -> Path:
    """Order 100 moves from 2025-11-28 to 2025-12-01 (another partition), order 103 is deleted,
    a new audit_log row (an excluded table)."""
    lines = [
        _canal("orders", "UPDATE", [{"id": "100", "customer_id": "1", "amount": "25.00", "region": "eu",
                                     "created_at": "2025-12-01 09:15:00"}], [{"created_at": "2025-11-28 09:15:00"}], seq=101),
        _canal("orders", "DELETE", [{"id": "103", "customer_id": "2", "amount": "7.00", "region": "us",
                                     "created_at": "2025-11-30 10:00:00"}], seq=102),
        _canal("audit_log", "INSERT", [{"id": "3", "action": "login", "at": "2025-12-01 09:00:00"}], seq=103,
               cols={"id": "BIGINT", "action": "VARCHAR(32)", "at": "DATETIME"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_filtered_renamed_partitioned_database_through_files(spark, tmp_path):
    from deltalake import DeltaTable as RustTable

    target = tmp_path / "lake"
    routing = Routing.of(include=[r"shop\..*"], exclude=[r"shop\.audit_log"], naming=Naming("{database}_{table}"),
                         partition_by={"shop.orders*": ["days(created_at)"]},
                         properties=[("shop.*", "delta.enableChangeDataFeed", "true")])
    keys = {"shop.ord*": ["id", "customer_id"]}  # a glob: the key of every table it matches
    s1 = ingest(spark, IngestConfig("canal-json", [str(SHOP)], str(target), primary_keys=keys, routing=routing))
    # 8 records, 11 events: 2 of them of shop.audit_log, counted and never written
    assert (s1.records_in, s1.decoded, s1.rejected, s1.events) == (8, 8, 0, 11)
    assert (s1.excluded_events, s1.excluded_tables) == (2, ["shop.audit_log"])
    assert sorted((r.table, tuple(r.key), r.key_source) for r in s1.tables) == [
        ("shop.customers", ("id",), "message"), ("shop.orders", ("id", "customer_id"), "configuration")]
    assert sorted(p.name for p in target.iterdir()) == ["_cdclake", "shop_customers", "shop_orders"]
    assert sorted(p.name for p in (target / "shop_orders").iterdir() if p.name.startswith("created_at_day=")) == [
        "created_at_day=2025-11-28", "created_at_day=2025-11-29", "created_at_day=2025-11-30"]

    s2 = ingest(spark, IngestConfig("canal-json", [str(_later_batch(tmp_path / "later.jsonl"))], str(target), primary_keys=keys,
                                    routing=routing))
    assert (s2.events, s2.excluded_events, s2.excluded_tables) == (3, 1, ["shop.audit_log"])
    orders = spark.read.format("delta").load(str(target / "shop_orders"))
    rows = [(r.id, str(r.created_at), str(r.created_at_day)) for r in orders.orderBy("id").collect()]
    assert rows == [(100, "2025-12-01 09:15:00", "2025-12-01"), (101, "2025-11-29 17:40:00", "2025-11-29")]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{target / 'shop_orders'}`").first()
    assert detail.partitionColumns == ["created_at_day"]
    assert detail.properties.get("delta.enableChangeDataFeed") == "true"
    # the table's own change feed: the move is an update (pre- and post-image), the delete a delete
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 2).load(str(target / "shop_orders"))
    changes = sorted((r._change_type, r.id, str(r.created_at_day)) for r in feed.collect())
    assert changes == [("delete", 103, "2025-11-30"), ("update_postimage", 100, "2025-12-01"),
                       ("update_preimage", 100, "2025-11-28")]
    # nothing of the excluded table anywhere in the target, the changelog included
    log = spark.read.format("delta").load(str(target / "_cdclake" / "changelog"))
    assert log.where("`table` = 'audit_log'").count() == 0 and log.count() == 9 + 2
    # delta-rs opens the partitioned, generated-column table and reads the same rows
    rust = RustTable(str(target / "shop_orders")).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], str(r["created_at_day"])) for r in rust) == [(100, "2025-12-01"), (101, "2025-11-29")]
    # a source rename: the new table is laid out as its name asks (partitioned, the property
    # set), and the rows move into it
    rename = tmp_path / "rename.jsonl"
    rename.write_text(_canal("orders", "RENAME", None, seq=104, ddl="RENAME TABLE orders TO orders_2025") + "\n")
    ingest(spark, IngestConfig("canal-json", [str(rename)], str(target), primary_keys=keys, routing=routing))
    moved = spark.read.format("delta").load(str(target / "shop_orders_2025"))
    assert sorted((r.id, str(r.created_at_day)) for r in moved.collect()) == [(100, "2025-12-01"), (101, "2025-11-29")]
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{target / 'shop_orders_2025'}`").first()
    assert detail.partitionColumns == ["created_at_day"] and detail.properties.get("delta.enableChangeDataFeed") == "true"
    assert spark.read.format("delta").load(str(target / "shop_orders")).count() == 0
    # a target keeps the naming it was made with
    with pytest.raises(CdclakeError) as e:
        ingest(spark, IngestConfig("canal-json", [str(SHOP)], str(target), routing=Routing()))
    assert e.value.code == "BAD_OPTION" and "--table-name {database}_{table}" in e.value.message


def test_a_history_table_partitioned_by_a_column_an_update_changes(spark, tmp_path):
    """SCD type 2 (``--scd-type 2``) with ``--partition-by shop.orders=region``: the version an
    update ends stays in its partition, the new one lands in the row's new partition."""
    target = tmp_path / "lake"
    routing = Routing.of(include=[r"shop\.orders"], partition_by={"shop.*": ["region"]})
    ingest(spark, IngestConfig("canal-json", [str(SHOP)], str(target), scd_type=2, routing=routing))
    moved = tmp_path / "moved.jsonl"
    moved.write_text(_canal("orders", "UPDATE", [{"id": "100", "customer_id": "1", "amount": "25.00", "region": "us",
                                                  "created_at": "2025-11-28 09:15:00"}], [{"region": "eu"}], seq=300) + "\n")
    s = ingest(spark, IngestConfig("canal-json", [str(moved)], str(target), routing=routing))
    assert [(r.table, r.updated) for r in s.tables] == [("shop.orders", 1)]
    rows = spark.read.format("delta").load(str(target / "shop.orders")).where("id = 100").orderBy("_cdc_valid_from").collect()
    assert [(r.region, r._cdc_is_current) for r in rows] == [("eu", False), ("us", True)]
    assert sorted(p.name for p in (target / "shop.orders").iterdir() if "=" in p.name) == ["region=eu", "region=us"]
    assert spark.sql(f"DESCRIBE DETAIL delta.`{target / 'shop.orders'}`").first().partitionColumns == ["region"]


def test_a_partition_column_the_table_lacks_stops_the_run(spark, tmp_path):
    routing = Routing.of(partition_by={"shop.orders": ["days(shipped_at)"]})
    with pytest.raises(CdclakeError) as e:
        ingest(spark, IngestConfig("canal-json", [str(SHOP)], str(tmp_path / "lake"), routing=routing))
    assert e.value.code == "BAD_OPTION" and "no column 'shipped_at'" in e.value.message


def test_a_folder_stream_names_its_tables_from_the_first_batch(spark, tmp_path, capsys):
    """A stream on a new target with ``--table-name``: the naming is the target's from its
    first micro-batch on (the stream checks the layout with it before the query starts)."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "shop.jsonl").write_text((SHOP / "shop.jsonl").read_text())
    target = tmp_path / "lake"
    assert main(["ingest", "--format", "canal-json", "--input", str(inbox), "--checkpoint", str(tmp_path / "cp"),
                 "--target", str(target), "--available-now", "--table-name", "{database}_{table}",
                 "--include-tables", r"shop\.(orders|customers)"]) == 0
    assert "excluded: 2 event(s) of 1 table(s) not written (shop.audit_log)" in capsys.readouterr().out
    assert sorted(p.name for p in target.iterdir()) == ["_cdclake", "shop_customers", "shop_orders"]
    assert json.loads((target / "_cdclake" / "layout.json").read_text())["table_name"] == "{database}_{table}"


@pytest.mark.kafka
def test_quick_start_through_kafka_then_a_table_by_name(spark, kafka_broker, kafka_topic, tmp_path, capsys):
    topic = kafka_topic()
    lines = [line.encode() for line in (SHOP / "shop.jsonl").read_text().splitlines() if line.strip()]
    kafka_broker.produce(topic, [(None, v) for v in lines])
    target, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    try:
        assert main(["ingest", "--format", "canal-json", "--kafka-bootstrap", kafka_broker.bootstrap, "--topic", topic,
                     "--target", str(target), "--checkpoint", str(checkpoint), "--available-now",
                     "--exclude-tables", r"shop\.audit_log", "--catalog-database", "shop"]) == 0
        out = capsys.readouterr().out
        assert "excluded: 2 event(s) of 1 table(s) not written (shop.audit_log)" in out
        rows = [(r.id, r.amount, r.region) for r in spark.table("shop.orders").orderBy("id").collect()]
        assert [(i, str(a), g) for i, a, g in rows] == [(100, "25.00", "eu"), (101, "12.50", "us"), (103, "7.00", "us")]
        assert [r.email for r in spark.sql("SELECT email FROM shop.customers ORDER BY id").collect()] == [
            "ada@example.com", "grace.h@example.com"]
        assert not spark.catalog.tableExists("shop.audit_log")
    finally:
        spark.sql("DROP DATABASE IF EXISTS shop CASCADE")  # external tables: the folders stay


# -- Spark's Hive support, its embedded metastore, processes of their own ---------------------------

_QUERY = textwrap.dedent("""
    import contextlib, io, json, sys

    target, readme = sys.argv[1], sys.argv[2]
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        exec(readme)  # the README's query, as a user pastes it: it makes the session
    from cdclake.spark import get_spark

    spark = get_spark()
    out = {"shown": shown.getvalue(), "implementation": spark.conf.get("spark.sql.catalogImplementation"),
           "tables": sorted(r.tableName for r in spark.sql("SHOW TABLES IN shop").collect()),
           "orders": [[r.id, str(r.created_at)] for r in spark.table("shop.orders").orderBy("id").collect()]}
    print("RESULT " + json.dumps(out))
""")

#: the suite's Spark settings for the processes these tests start (tests/conftest.py: small
#: data, interpreted expressions), as ``CDCLAKE_SPARK_CONF`` (its JVM options stay cdclake's)
SUBPROCESS_ENV = {**os.environ, "CDCLAKE_SPARK_CONF": " ".join(f"{k}={v}" for k, v in TEST_CONF.items() if " " not in v)}


def readme_quick_start() -> tuple[list[str], str]:
    """The README's files quick start: the ``cdclake ingest ... examples/shop`` command (its
    arguments) and the Python of the ``python -c`` that follows it, as a user copies them."""
    blocks = [b.split("```", 1)[0] for b in README.read_text().split("```bash")[1:]]
    block = next(b for b in blocks if "examples/shop" in b).replace("\\\n", " ")
    command = next(line for line in block.splitlines() if "cdclake ingest" in line and "examples/shop" in line)
    query = block.split("python -c '", 1)[1].split("'", 1)[0]
    return shlex.split(command, comments=True), query


def _schema_change_and_rename(path: Path) -> Path:
    cols = {"id": "BIGINT", "customer_id": "BIGINT", "amount": "DECIMAL(10,2)", "region": "VARCHAR(16)",
            "created_at": "DATETIME", "note": "VARCHAR(32)"}
    lines = [
        _canal("orders", "ALTER", None, seq=201, ddl="ALTER TABLE orders ADD COLUMN note VARCHAR(32)", cols=cols),
        _canal("orders", "INSERT", [{"id": "104", "customer_id": "1", "amount": "3.00", "region": "eu",
                                     "created_at": "2025-12-02 08:00:00", "note": "gift"}], seq=202, cols=cols),
        _canal("customers", "RENAME", None, seq=203, ddl="RENAME TABLE customers TO clients",
               cols={"id": "BIGINT", "name": "VARCHAR(64)", "email": "VARCHAR(128)"}),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_quick_start_with_the_embedded_hive_metastore(tmp_path):
    """The README's files quick start as a user types it (``cdclake ingest ... --catalog-database
    shop`` in a process of its own: Spark's Hive support, a Derby metastore under the target),
    then the README's query in another process that opens that metastore
    (``spark.table("shop.orders")``)."""
    target = tmp_path / "lake"
    command, query = readme_quick_start()
    assert command[0] == ".venv/bin/cdclake" and "--catalog-database" in command
    argv = [str(REPO / command[0]), *(str(target) if a == "./lake" else str(REPO / a) if a == "examples/shop" else a
                                      for a in command[1:])]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=SUBPROCESS_ENV, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (target / "_cdclake" / "metastore" / "metastore_db").is_dir()
    q = subprocess.run([sys.executable, "-c", _QUERY, str(target), query.replace("./lake", str(target))],
                       capture_output=True, text=True, cwd=REPO, env=SUBPROCESS_ENV, timeout=600)
    assert q.returncode == 0, q.stderr[-3000:]
    out = json.loads(next(line for line in q.stdout.splitlines() if line.startswith("RESULT "))[len("RESULT "):])
    assert out["implementation"] == "hive"
    assert "|100|" in out["shown"].replace(" ", "") and "2025-11-29 17:40:00" in out["shown"]
    assert out["tables"] == ["audit_log", "customers", "orders"]
    assert out["orders"] == [[100, "2025-11-28 09:15:00"], [101, "2025-11-29 17:40:00"], [103, "2025-11-30 10:00:00"]]


def test_the_catalog_follows_a_schema_change_and_a_rename(spark, tmp_path, capsys):
    """In the session's own catalog: an ``ADD COLUMN`` shows in the catalog table (Spark reads
    the schema from the Delta log), a ``RENAME TABLE customers TO clients`` at the source
    moves the catalog entry with the table."""
    target = tmp_path / "lake"
    args = ["ingest", "--format", "canal-json", "--target", str(target), "--catalog-database", "shop_catalog", "--quiet"]
    try:
        assert main([*args, "--input", str(SHOP)]) == 0
        assert sorted(r.tableName for r in spark.sql("SHOW TABLES IN shop_catalog").collect()) == ["audit_log", "customers", "orders"]
        assert main([*args, "--input", str(_schema_change_and_rename(tmp_path / "later.jsonl"))]) == 0
        assert sorted(r.tableName for r in spark.sql("SHOW TABLES IN shop_catalog").collect()) == ["audit_log", "clients", "orders"]
        assert [c for c in spark.table("shop_catalog.orders").columns if not c.startswith("_cdc_")] == [
            "id", "customer_id", "amount", "region", "created_at", "note"]
        assert [(r.id, r.note) for r in spark.sql("SELECT id, note FROM shop_catalog.orders WHERE id = 104").collect()] == [(104, "gift")]
        assert [(r.id, r.email) for r in spark.sql("SELECT id, email FROM shop_catalog.clients ORDER BY id").collect()] == [
            (1, "ada@example.com"), (2, "grace.h@example.com")]
    finally:
        spark.sql("DROP DATABASE IF EXISTS shop_catalog CASCADE")  # external tables: the folders stay
