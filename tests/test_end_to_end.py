"""The main job end to end on real messages: files -> decode -> Delta tables, final tables
asserted typed, row by row. Expected tables were worked out by hand from the messages.

Origins (shared/fixtures/SOURCES.md): Apache Flink ``canal-data.txt``,
``debezium-data-schema-include.txt``, ``debezium-postgres-data-schema-exclude.txt``; Apache
Paimon ``kafka/canal/database/schemaevolution/topic0`` and ``kafka/aliyun/table/event``.
"""

from __future__ import annotations

from datetime import datetime

from cdclake.apply import audit
from cdclake.pipeline import IngestConfig, ingest
from tests.conftest import fixture_lines, fixture_path
from tests.readers import assert_target_opens_in_delta_rs


def rows(spark, target, name, *cols):
    df = spark.read.format("delta").load(f"{target}/{name}")
    return sorted(tuple(r[c] for c in cols) for r in df.collect())


def history_versions(spark, path):
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history().count()


# inventory.products2 after every change in Flink's canal-data.txt, by hand:
# inserts 101..109; 106 description -> '18oz carpenter hammer'; 107 weight 5.3 -> 5.1;
# insert 110, 111; 110 -> 'new water resistent white wind breaker', 0.5; 111 weight 5.17;
# delete 111; 101 and 102 weight -> 5.17; delete 102 and 103.
CANAL_PRODUCTS = [
    (101, "scooter", "Small 2-wheel scooter", 5.17),
    (104, "hammer", "12oz carpenter's hammer", 0.75),
    (105, "hammer", "14oz carpenter's hammer", 0.875),
    (106, "hammer", "18oz carpenter hammer", 1.0),
    (107, "rocks", "box of assorted rocks", 5.1),
    (108, "jacket", "water resistent black wind breaker", 0.1),
    (109, "spare tire", "24 inch spare tire", 22.2),
    (110, "jacket", "new water resistent white wind breaker", 0.5),
]


def test_canal_flink_file_and_rerun_is_a_no_op(spark, tmp_path):
    target = tmp_path / "lake"
    cfg = IngestConfig("canal-json", [str(fixture_path("canal-json/apache-flink/canal-data.txt"))], str(target))
    s = ingest(spark, cfg)
    assert (s.records_in, s.decoded, s.rejected, s.events) == (11, 11, 0, 21)
    got = rows(spark, target, "inventory.products2", "id", "name", "description", "weight")
    assert [(i, n, d, round(w, 3)) for i, n, d, w in got] == CANAL_PRODUCTS
    df = spark.read.format("delta").load(f"{target}/inventory.products2")
    assert dict(df.dtypes) == {
        "id": "int", "name": "string", "description": "string", "weight": "float",
        "_cdc_position": "array<decimal(38,0)>", "_cdc_position_text": "string", "_cdc_op": "string",
        "_cdc_event_time_ms": "bigint", "_cdc_record": "struct<file:string,line:bigint,partition:int,offset:bigint>",
    }
    assert spark.read.format("delta").load(f"{target}/_cdclake/changelog").count() == 21
    before = sorted(map(tuple, df.collect()))
    s2 = ingest(spark, cfg)
    assert (s2.tables[0].inserted, s2.tables[0].updated, s2.tables[0].deleted) == (0, 0, 0)
    assert sorted(map(tuple, spark.read.format("delta").load(f"{target}/inventory.products2").collect())) == before
    assert spark.read.format("delta").load(f"{target}/_cdclake/changelog").count() == 21
    progress = next(r for r in audit.read_progress(spark, target).rows if r["table"] == "inventory.products2")
    assert progress["last_position_text"] == "1589374013000:12:1" and progress["last_event_time_ms"] == 1589374013000
    assert_target_opens_in_delta_rs(spark, target)


def test_canal_paimon_schema_evolution_adds_and_widens(spark, tmp_path):
    # t1: k int key, v1 varchar(10); ALTER ADD v2 INT; then MODIFY v2 BIGINT (9000000000000)
    files = [
        str(fixture_lines(f"canal-json/apache-paimon/kafka/canal/database/schemaevolution/topic0/canal-data-{i}.txt", tmp_path))
        for i in (1, 2, 3)
    ]
    target = tmp_path / "lake"
    for f in files:  # one batch per file, as three Kafka polls would deliver them
        ingest(spark, IngestConfig("canal-json", [f], str(target)))
    assert rows(spark, target, "paimon_sync_database.t1", "k", "v1", "v2") == [
        (1, "one", None), (3, "three", None), (5, "five", 50), (7, "seven", 70), (9, "nine", 9000000000000),
    ]
    df = spark.read.format("delta").load(f"{target}/paimon_sync_database.t1")
    assert dict(df.dtypes)["v2"] == "bigint"
    changes = [r["change"] for r in spark.read.format("delta").load(f"{target}/_cdclake/schema_history").orderBy("recorded_at_ms").collect()]
    assert changes[0].startswith("create table") and "add columns (v2 int)" in changes and "widen v2 int -> bigint" in changes
    # v2 widened in place: only that table has type widening on, which delta-rs cannot read
    assert_target_opens_in_delta_rs(spark, target, widened=("paimon_sync_database.t1",))


def test_debezium_mysql_and_postgres(spark, tmp_path):
    target = tmp_path / "lake"
    # Flink's MySQL file (schema included): 15 messages about inventory.products
    s = ingest(spark, IngestConfig("debezium-json", [str(fixture_path("debezium-json/apache-flink/debezium-data-schema-include.txt"))], str(target)))
    assert s.rejected == 0
    got = rows(spark, target, "inventory.products", "id", "name", "description", "weight")
    by_id = {r[0]: r for r in got}
    # by hand: 101..109 snapshot inserts; 106 -> '18oz carpenter hammer'; 107 weight 5.1;
    # 110, 111 inserted; 110 -> 'new water resistent white wind breaker' 5.18 -> ...; 111 deleted
    assert 111 not in by_id and sorted(by_id) == [101, 102, 103, 104, 105, 106, 107, 108, 109, 110]
    assert by_id[106][2] == "18oz carpenter hammer"
    assert round(by_id[107][3], 2) == 5.1
    df = spark.read.format("delta").load(f"{target}/inventory.products")
    assert dict(df.dtypes)["id"] == "int" and dict(df.dtypes)["weight"] == "double"
    # PostgreSQL without schema: table postgres.inventory.products (db.schema.table)
    ingest(spark, IngestConfig("debezium-json", [str(fixture_path("debezium-json/apache-flink/debezium-postgres-data-schema-exclude.txt"))], str(target)))
    pg = rows(spark, target, "postgres.inventory.products", "id", "name")
    assert len(pg) == len(got) and pg[0] == (101, "scooter")
    assert_target_opens_in_delta_rs(spark, target)


def test_dataworks_paimon_files_and_split_update_with_key_change(spark, tmp_path):
    target = tmp_path / "lake"
    files = [
        str(fixture_lines(f"aliyun-dataworks-json/apache-paimon/kafka/aliyun/table/event/{n}.txt", tmp_path))
        for n in ("event-insert", "event-update-in-one", "event-delete")
    ]
    ingest(spark, IngestConfig("dataworks-json", files, str(target)))
    # insert id 2 (1.1); update id 2 val 1.1 -> 2.2; delete id 1 (never inserted here)
    got = rows(spark, target, "bigdata_test.sync_test_table", "id", "val", "name", "create_time")
    assert got == [(2, 2.2, "a", datetime(2024, 11, 15, 8, 58, 34))]
    # split update (UPDATE_BEFOR + UPDATE_AFTER, same sequenceId) that changes the key
    msg = (
        '{{"schema":{{"dataColumn":[{{"name":"id","type":"LONG"}},{{"name":"val","type":"DOUBLE"}}],"primaryKey":["id"],'
        '"source":{{"dbType":"MySQL","dbName":"d","tableName":"t"}}}},"payload":{{"before":{b},"after":{a},'
        '"sequenceId":"{seq}","timestamp":{{"eventTime":1}},"op":"{op}","ddl":null}},"version":"0.0.1"}}'
    )
    lines = [
        msg.format(b="null", a='{"dataColumn":{"id":1,"val":1.5}}', seq=10, op="INSERT"),
        msg.format(b='{"dataColumn":{"id":1,"val":1.5}}', a="null", seq=11, op="UPDATE_BEFOR"),
        msg.format(b="null", a='{"dataColumn":{"id":7,"val":1.5}}', seq=11, op="UPDATE_AFTER"),
    ]
    p = tmp_path / "split.txt"
    p.write_text("\n".join(lines) + "\n")
    ingest(spark, IngestConfig("dataworks-json", [str(p)], str(target)))
    assert rows(spark, target, "d.t", "id", "val") == [(7, 1.5)]
    assert_target_opens_in_delta_rs(spark, target)


def test_bad_lines_go_to_rejects_and_good_ones_apply(spark, tmp_path):
    good = '{"data":[{"id":"%d","v":"x"}],"database":"d","table":"t","pkNames":["id"],"isDdl":false,"mysqlType":{"id":"int","v":"varchar(5)"},"es":%d,"id":%d,"type":"INSERT"}'
    lines = [good % (1, 1, 1), '{"data":[{"id"', "garbage", good % (2, 2, 2), good.replace('"id":"%d"', '"id":"x%d"') % (3, 3, 3)]
    p = tmp_path / "mixed.txt"
    p.write_text("\n".join(lines) + "\n")
    target = tmp_path / "lake"
    s = ingest(spark, IngestConfig("canal-json", [str(p)], str(target)))
    assert (s.records_in, s.decoded, s.rejected) == (5, 2, 3)
    assert s.records_in == s.decoded + s.rejected
    assert s.reject_codes == {"MALFORMED_JSON": 2, "BAD_VALUE": 1}
    assert rows(spark, target, "d.t", "id", "v") == [(1, "x"), (2, "x")]
    rej = spark.read.format("delta").load(f"{target}/_cdclake/rejects").orderBy("source_record.line").collect()
    assert [(r["source_record"]["line"], r["error_code"]) for r in rej] == [(2, "MALFORMED_JSON"), (3, "MALFORMED_JSON"), (5, "BAD_VALUE")]
    assert bytes(rej[1]["raw_value"]) == b"garbage" and rej[0]["format"] == "canal-json"
    # re-running adds no duplicate rejects
    ingest(spark, IngestConfig("canal-json", [str(p)], str(target)))
    assert spark.read.format("delta").load(f"{target}/_cdclake/rejects").count() == 3
    # a Canal ERASE (DROP TABLE) ends the table's rows at its position: an insert after it lands,
    # an older one re-delivered after it does not
    erase = '{"data":null,"database":"d","table":"t","pkNames":null,"isDdl":true,"sql":"DROP TABLE `d`.`t`","es":4,"id":4,"type":"ERASE"}'
    p2 = tmp_path / "erase.txt"
    p2.write_text("\n".join([erase, good % (7, 5, 5), good % (1, 1, 1)]) + "\n")
    s = ingest(spark, IngestConfig("canal-json", [str(p2)], str(target)))
    assert (s.records_in, s.rejected) == (3, 0)
    assert rows(spark, target, "d.t", "id", "v") == [(7, "x")]
    history = spark.read.format("delta").load(f"{target}/_cdclake/schema_history").where("change like 'table dropped%'").collect()
    assert [(r["table"], r["ddl"]) for r in history] == [("d.t", "DROP TABLE `d`.`t`")]
    # a Canal RENAME moves the rows (cdclake.apply.renames); a change of t older than the rename
    # that arrives in a later batch follows them to t2
    rename = '{"data":null,"database":"d","table":"t","pkNames":null,"isDdl":true,"sql":"RENAME TABLE `t` TO `t2`","es":6,"id":6,"type":"RENAME"}'
    p3, p4 = tmp_path / "rename.txt", tmp_path / "late.txt"
    p3.write_text("\n".join([rename, good.replace('"table":"t"', '"table":"t2"') % (9, 7, 7)]) + "\n")
    p4.write_text(good % (8, 5, 5) + "\n")
    ingest(spark, IngestConfig("canal-json", [str(p3)], str(target)))
    ingest(spark, IngestConfig("canal-json", [str(p4)], str(target)))
    assert rows(spark, target, "d.t", "id", "v") == []
    assert rows(spark, target, "d.t2", "id", "v") == [(7, "x"), (8, "x"), (9, "x")]


def _wider(line: str, copies: int = 2) -> str:
    """A Debezium record of the real PostgreSQL connector with each column but ``id`` repeated
    ``copies`` more times under new names (schema and values): a wide table of mixed types."""
    import json

    rec = json.loads(line)
    for f in rec["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            base = f["fields"]
            f["fields"] = base + [dict(x, field=f"{x['field']}_{k}") for k in range(1, copies + 1) for x in base if x["field"] != "id"]
    for img in ("before", "after"):
        if rec["payload"].get(img):
            image = rec["payload"][img]
            rec["payload"][img] = dict(image, **{f"{c}_{k}": v for k in range(1, copies + 1) for c, v in image.items() if c != "id"})
    return json.dumps(rec)


def test_real_debezium_output_runs_compiled_and_quiet(tmp_path):
    # issue 50: the real PostgreSQL connector's records of a table of 37 types
    # (tests/formats/debezium_json/golden), and the same table made 109 columns wide, through the
    # command in a process of its own with cdclake's own Spark settings (code generation on,
    # unlike this suite's session): no generated-code fallback ("Code grows beyond 64 KB"; one
    # projection of the 109 columns' conversions outgrew it before typed.unfused), no ERROR, no
    # stack trace
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import REPO

    golden = Path(REPO) / "tests/formats/debezium_json/golden/postgres-3.6.1.jsonl"
    lines = [line for line in golden.read_text().splitlines() if '"types_all"' in line]
    real, wide = tmp_path / "real.jsonl", tmp_path / "wide.jsonl"
    real.write_text("".join(line + "\n" for line in lines))
    wide.write_text("".join(_wider(line) + "\n" for line in lines))
    r = subprocess.run(
        [sys.executable, "-m", "cdclake.cli", "ingest", "--format", "debezium-json", "--input", str(real), str(wide),
         "--target", str(tmp_path / "lake"), "--primary-key", "types_all=id", "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    assert "records in: 6  decoded: 6  rejected: 0" in r.stdout, log
    for bad in ("Code grows beyond", "ERROR", "Exception", "\tat "):
        assert bad not in log, f"{bad!r} in the command's output:\n{log}"
