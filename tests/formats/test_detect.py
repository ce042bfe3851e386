"""``--format auto``: each of the seven formats is recognised from its first records, and an
input that fits none fails with a one-line error naming the candidates. Pure Python (the
detection reads a few records on the driver): no Spark needed.

Inputs: real fixtures where they exist (Flink canal-json and Debezium files, Paimon DataWorks
files, the Attunity Qlik messages); seed examples otherwise (SharePlex: seed 001; TUPLE rows:
seed 000's metadata columns); DTS Avro: a container file written with fastavro from the shipped
schema.
"""

from __future__ import annotations

import json

import pytest

from cdclake.errors import CdclakeError
from cdclake.pipeline import detect_format
from tests.conftest import fixture_lines, fixture_path

SHAREPLEX = {
    "meta": {"time": "2017-06-16T14:24:34", "userid": 84, "op": "ins", "scn": "14589063118712", "rowid": "AAATGpAAIAAItcIAAA",
             "trans": "7.0.411499", "seq": 1, "size": 11, "table": "CL_BIZ1.MIO_LOG", "idx": "1/11", "posttime": "2017-06-16T14:33:52"},
    "data": {"MIO_LOG_ID": "32539737", "CNTR_NO": "1171201606"},
}
TUPLE = {"id": 1, "name": "a", "_sequence_id_": "1649991610688000000", "_operation_type_": "I", "_excute_time_": 1649991726000,
         "_source_table_": "db.t", "_before_image_": "N", "_after_image_": "Y"}


def one_line_file(tmp_path, name, docs):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(d) if not isinstance(d, str) else d for d in docs) + "\n")
    return str(p)


def qlik(tmp_path):
    base = "qlik-replicate/jcustenborder-attunity-json-converter/src/test/resources/com/github/jcustenborder/kafka/conversion/attunity/model/"
    docs = [json.loads(fixture_path(base + n).read_text()) for n in ("Metadata.json", "Data.json")]
    return one_line_file(tmp_path, "qlik.jsonl", docs)


def dts(tmp_path):
    import fastavro

    from cdclake.formats.dts_avro.schema import RECORD_SCHEMA

    rec = {
        "version": 1, "id": 1, "sourceTimestamp": 1700000000, "sourcePosition": "1@mysql-bin.1", "safeSourcePosition": "",
        "sourceTxid": "", "source": {"sourceType": "MySQL", "version": "8"}, "operation": "HEARTBEAT", "objectName": None,
        "processTimestamps": None, "tags": {}, "fields": None, "beforeImages": None, "afterImages": None, "bornTimestamp": 0,
    }
    p = tmp_path / "dts.avro"
    with open(p, "wb") as fh:
        fastavro.writer(fh, fastavro.parse_schema(RECORD_SCHEMA), [rec])
    return str(p)


CASES = {
    "canal-json": lambda tmp: str(fixture_path("canal-json/apache-flink/canal-data.txt")),
    "debezium-json": lambda tmp: str(fixture_path("debezium-json/apache-flink/debezium-data-schema-include.txt")),
    "dataworks-json": lambda tmp: str(fixture_lines("aliyun-dataworks-json/apache-paimon/kafka/aliyun/table/event/event-insert.txt", tmp)),
    "qlik-json": qlik,
    "shareplex-json": lambda tmp: one_line_file(tmp, "sp.jsonl", [SHAREPLEX]),
    "datahub-tuple": lambda tmp: one_line_file(tmp, "tuple.jsonl", [TUPLE]),
    "dts-avro": dts,
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_auto_detects_each_format(fmt, tmp_path):
    assert detect_format([CASES[fmt](tmp_path)]).name == fmt


def test_unknown_input_fails_with_candidates(tmp_path):
    p = one_line_file(tmp_path, "x.jsonl", [{"hello": "world"}])
    with pytest.raises(CdclakeError) as e:
        detect_format([p])
    assert e.value.code == "FORMAT_NOT_DETECTED" and "canal-json" in e.value.message and "\n" not in e.value.message
