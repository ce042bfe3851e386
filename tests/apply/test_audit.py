"""The ``_cdclake`` audit tables of a target written before a field was added to
``source_record`` (``headers``, session 8) take the new field on their next append: the old
rows read it as null, nothing is refused or rewritten."""

from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from cdclake.apply import audit
from cdclake.model import DECODED_SCHEMA, EVENT_SCHEMA, SOURCE_RECORD_SCHEMA
from tests.apply.test_semantics import ev, row


def _without_headers(schema: StructType) -> StructType:
    old = StructType([f for f in SOURCE_RECORD_SCHEMA.fields if f.name != "headers"])
    return StructType([StructField(f.name, old if f.name == "source_record" else f.dataType, True) for f in schema.fields])


def test_changelog_and_rejects_of_an_older_target_gain_the_headers_field(spark, tmp_path):
    target = str(tmp_path)
    old_event = ev("c", 1, after=row(1, "a"))
    old_event["source_record"].pop("headers", None)
    spark.createDataFrame([old_event], _without_headers(EVENT_SCHEMA)).withColumn("_ingested_at_ms", F.lit(1).cast("long")).write.format(
        "delta").save(f"{target}/{audit.CHANGELOG}")

    new_event = ev("c", 2, after=row(2, "b"))
    new_event["source_record"] = {"topic": "t", "partition": 0, "offset": 7, "timestamp_ms": 5, "file": None, "line": None,
                                  "headers": [{"key": "h", "value": b"v"}]}
    audit.write_changelog(spark.createDataFrame([new_event], EVENT_SCHEMA), target)
    rejected = {"source_record": new_event["source_record"], "raw_key": None, "raw_value": b"x", "events": [],
                "error_code": "MALFORMED_JSON", "error_message": "value is not valid JSON"}
    audit.write_rejects(spark.createDataFrame([rejected], DECODED_SCHEMA), "canal-json", target)

    got = spark.read.format("delta").load(f"{target}/{audit.CHANGELOG}")
    assert got.schema["source_record"].dataType == SOURCE_RECORD_SCHEMA
    rows = sorted((r["position"]["text"], r["source_record"]["headers"]) for r in got.collect())
    assert [(p, h and [(x["key"], bytes(x["value"])) for x in h]) for p, h in rows] == [("1", None), ("2", [("h", b"v")])]
    rej = spark.read.format("delta").load(f"{target}/{audit.REJECTS}").collect()
    assert [(r["error_code"], r["source_record"]["offset"], r["source_record"]["headers"][0]["key"]) for r in rej] == [("MALFORMED_JSON", 7, "h")]
