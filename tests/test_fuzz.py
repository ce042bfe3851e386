"""Fuzzing every decoder with damaged records (issue 11): nothing crashes, every record is
either decoded or rejected with a stable code, records in = decoded + rejected.

Valid records come from two places: each format's encoder over a seeded simulated workload (all
eight formats), and real messages committed by public projects for the JSON formats that have
them (``shared/fixtures``: Flink's Canal and Debezium test data, Paimon's DataWorks test data;
origins in ``shared/fixtures/SOURCES.md``). :mod:`cdclake.testing.mutate` damages them; the fixed
hostile values (empty, white space, ``null``, deep nesting, invalid UTF-8, duplicate keys, a
10 MB value) go to every decoder too.

All formats are decoded in one Spark job (a union of the eight decoders' plans, one aggregate).
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


@given(st.integers(min_value=0, max_value=2**32))
def test_every_decoder_survives_damaged_records(spark, tmp_path_factory, seed: int):
    rnd = random.Random(seed)
    real = _real(tmp_path_factory.mktemp("real"))
    inputs = fuzz_inputs(rnd, per_format=16, real=real, big_bytes=10 * 1024 * 1024, extra={"dataworks-json": [DATAWORKS_DDL]})
    counts, sample = decode_mutated(spark, inputs, keep=[("dataworks-json", DATAWORKS_DDL)])

    names = {d.name for d in formats.all_decoders()}
    assert set(counts) == names
    codes = {c.value for c in RejectCode}
    for fmt, by_code in counts.items():
        # records in = decoded + rejected, for every decoder: one output row per input record
        assert sum(by_code.values()) == len(inputs[fmt]), fmt
        assert set(by_code) - {None} <= codes, (fmt, by_code)
        # the damage is seen: most damaged records are rejected, and some survive whole
        assert sum(n for c, n in by_code.items() if c is not None) > len(inputs[fmt]) // 4, (fmt, by_code)
    # the Java object in ddlMeta is inert: the DDL decodes to its text, the payload goes nowhere
    (ddl,) = sample[("dataworks-json", DATAWORKS_DDL)]
    assert ddl.error_code is None
    assert [(e.kind, e.ddl) for e in ddl.events] == [("ddl", "ALTER TABLE t ADD COLUMN c INT")]
    assert "java" not in json.dumps([e.asDict(recursive=True) for e in ddl.events], default=str).lower()
