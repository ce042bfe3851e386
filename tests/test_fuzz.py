"""Fuzzing every decoder with damaged records (issue 11): nothing crashes, every record is
either decoded or rejected with a stable code, records in = decoded + rejected.

Valid records come from two places: each format's encoder over a seeded simulated workload (all
seven formats), and real messages committed by public projects for the JSON formats that have
them (``shared/fixtures``: Flink's Canal and Debezium test data, Paimon's DataWorks test data;
origins in ``shared/fixtures/SOURCES.md``). :mod:`cdclake.testing.mutate` damages them; the fixed
hostile values (empty, white space, ``null``, deep nesting, invalid UTF-8, duplicate keys, a
10 MB value) go to every decoder too.

All formats are decoded in one Spark job (a union of the seven decoders' plans, one aggregate).
Under the ``ci`` hypothesis profile one example (one batch of mutations per format) runs; the
``thorough`` profile (``bin/test --thorough``) runs ten; ``bench/fuzz.py`` runs as many as asked
and prints the rejects by code.
"""

from __future__ import annotations

import base64
import json
import random

from hypothesis import given
from hypothesis import strategies as st

from cdclake import formats
from cdclake.errors import RejectCode
from cdclake.testing.fuzz import decode_mutated, fuzz_inputs
from tests.conftest import fixture_lines

#: real messages per format (first lines of these files)
REAL = {
    "canal-json": ["canal-json/apache-flink/canal-data.txt"],
    "debezium-json": ["debezium-json/apache-flink/debezium-data-schema-include.txt", "debezium-json/apache-flink/debezium-data-schema-exclude.txt"],
    "dataworks-json": ["aliyun-dataworks-json/apache-paimon/kafka/aliyun/table/event/event-insert.txt"],
}


def _real(tmp_path) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for fmt, files in REAL.items():
        for rel in files:
            lines = fixture_lines(rel, tmp_path).read_bytes().splitlines()
            out.setdefault(fmt, []).extend(line for line in lines[:20] if line.strip())
    return out


#: a DataWorks DDL record whose ``ddlMeta`` holds a serialised Java object (the stream magic
#: ``AC ED 00 05`` and a class descriptor): it must be carried as inert text, never deserialised
JAVA_PAYLOAD = base64.b64encode(b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap\x05\x07\xda\xc1\xc3\x16`\xd1\x03\x00\x02F\x00\nloadFactor").decode()
DATAWORKS_DDL = json.dumps({
    "version": "0.0.1", "schema": {"dataColumn": None, "primaryKey": None, "source": {"dbType": "MySQL", "dbName": "db", "tableName": "t"}},
    "payload": {"before": None, "after": None, "sequenceId": "7", "timestamp": {"eventTime": 1000, "systemTime": 1001, "checkpointTime": 1000},
                "op": "ALTER", "ddl": {"text": "ALTER TABLE t ADD COLUMN c INT", "ddlMeta": JAVA_PAYLOAD}, "scn": None, "extraInfo": None},
}).encode()


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)  # Avro's zigzag long
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


#: a DTS datum whose ``sourcePosition`` (the fourth field, a string) declares 2 GiB: Avro
#: allocated that before reading, and the JVM died of OutOfMemoryError (found by bench/fuzz.py;
#: cdclake.spark.AVRO_LIMITS bounds it): it must be one AVRO_DECODE_ERROR
AVRO_HUGE_STRING = _varint(1) + _varint(1) + _varint(1) + _varint(2**31 - 16) + b"x" * 16


#: a Canal ``blob`` value (Canal writes bytes as ISO-8859-1 text) holding characters ISO-8859-1
#: lacks: Spark 4's ``encode`` raised MALFORMED_CHARACTER_CODING and failed the whole job
#: (found by bench/fuzz.py); it must be one BAD_VALUE
CANAL_NOT_LATIN1 = json.dumps({
    "data": [{"id": "1", "b": "\u20ac\u4e2d"}], "database": "d", "table": "t", "es": 1, "ts": 1, "id": 1, "isDdl": False,
    "mysqlType": {"id": "int", "b": "blob"}, "sqlType": {"id": 4, "b": 2004}, "pkNames": ["id"], "old": None, "type": "INSERT",
}).encode()


@given(st.integers(min_value=0, max_value=2**32))
def test_every_decoder_survives_damaged_records(spark, tmp_path_factory, seed: int):
    rnd = random.Random(seed)
    real = _real(tmp_path_factory.mktemp("real"))
    extra = {"dataworks-json": [DATAWORKS_DDL], "dts-avro": [AVRO_HUGE_STRING], "canal-json": [CANAL_NOT_LATIN1]}
    inputs = fuzz_inputs(rnd, per_format=16, real=real, big_bytes=10 * 1024 * 1024, extra=extra)
    counts, sample = decode_mutated(spark, inputs, keep=[(f, v) for f, vs in extra.items() for v in vs])

    names = {d.name for d in formats.all_decoders()}
    assert set(counts) == names
    codes = {c.value for c in RejectCode}
    for fmt, by_code in counts.items():
        # records in = decoded + rejected, for every decoder: one output row per input record
        assert sum(by_code.values()) == len(inputs[fmt]), fmt
        assert set(by_code) - {None} <= codes, (fmt, by_code)
        # the damage is seen: most damaged records are rejected, and some survive whole
        assert sum(n for c, n in by_code.items() if c is not None) > len(inputs[fmt]) // 4, (fmt, by_code)
    (huge,) = sample[("dts-avro", AVRO_HUGE_STRING)]
    assert huge.error_code == RejectCode.AVRO_DECODE_ERROR.value
    (latin,) = sample[("canal-json", CANAL_NOT_LATIN1)]
    assert latin.error_code == RejectCode.BAD_VALUE.value and "column(s) b" in latin.error_message
    # the Java object in ddlMeta is inert: the DDL decodes to its text, the payload goes nowhere
    (ddl,) = sample[("dataworks-json", DATAWORKS_DDL)]
    assert ddl.error_code is None
    assert [(e.kind, e.ddl) for e in ddl.events] == [("ddl", "ALTER TABLE t ADD COLUMN c INT")]
    assert "java" not in json.dumps([e.asDict(recursive=True) for e in ddl.events], default=str).lower()
