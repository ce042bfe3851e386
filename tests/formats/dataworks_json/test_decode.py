"""Tests of the ``dataworks-json`` (alias ``datahub-blob``) decoder.

Real messages: Apache Paimon's ``kafka/aliyun/table/event`` test files (origins in
``shared/fixtures/SOURCES.md``). Seed samples: ``shared/seeds/002_f06f21975cd4d102.txt``
(DataWorks "sync all to Kafka") and ``shared/seeds/000_d2c269d42c40e542.txt`` (DataHub BLOB),
copied verbatim; the 000 samples are annotated with ``// ...`` comments in the seed, which are
removed here (nothing else changed but the spaces before the removed comments). Cases the seeds
have no sample for are hand-written on the seeds' templates and say so.

All files are decoded together, once, to keep the run lean.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from tests.conftest import fixture_lines

FMT = "dataworks-json"
PAIMON = "aliyun-dataworks-json/apache-paimon/kafka/aliyun/table/event"

# --- seed 002 (DataWorks), verbatim ---------------------------------------------------------
# "ソースへのデータ挿入": insert into a MySQL table without primary key (#alibaba_rds_row_id#)
S002_INSERT = '{ "schema": { "dataColumn": [ { "name": "name", "type": "STRING" }, { "name": "job", "type": "STRING" }, { "name": "sex", "type": "STRING" }, { "name": "#alibaba_rds_row_id#", "type": "LONG" } ], "primaryKey": null, "source": { "dbType": "MySQL", "dbName": "pkset_test", "tableName": "pkset_test_no_pk" } }, "payload": { "before": null, "after": { "dataColumn": { "name": "name11", "job": "job11", "sex": "man", "#alibaba_rds_row_id#": 15 } }, "sequenceId": "1620457642589000000", "timestamp": { "eventTime": 1620457896000, "systemTime": 1620457896977, "checkpointTime": 1620457896000 }, "op": "INSERT", "ddl": null }, "version": "0.0.1" }'
# "変更前のデータの状態": the before half of a split update
S002_UPDATE_BEFOR = '{ "schema": { "dataColumn": [ { "name": "name", "type": "STRING" }, { "name": "job", "type": "STRING" }, { "name": "sex", "type": "STRING" }, { "name": "#alibaba_rds_row_id#", "type": "LONG" } ], "primaryKey": null, "source": { "dbType": "MySQL", "dbName": "pkset_test", "tableName": "pkset_test_no_pk" } }, "payload": { "before": { "dataColumn": { "name": "name11", "job": "job11", "sex": "man", "#alibaba_rds_row_id#": 15 } }, "after": null, "sequenceId": "1620457642589000001", "timestamp": { "eventTime": 1620458077000, "systemTime": 1620458077779, "checkpointTime": 1620458077000 }, "op": "UPDATE_BEFOR", "ddl": null }, "version": "0.0.1" }'
# "変更後のデータの状態": the after half of the same update (same sequenceId)
S002_UPDATE_AFTER = '{ "schema": { "dataColumn": [ { "name": "name", "type": "STRING" }, { "name": "job", "type": "STRING" }, { "name": "sex", "type": "STRING" }, { "name": "#alibaba_rds_row_id#", "type": "LONG" } ], "primaryKey": null, "source": { "dbType": "MySQL", "dbName": "pkset_test", "tableName": "pkset_test_no_pk" } }, "payload": { "before": null, "after": { "dataColumn": { "name": "name11", "job": "job11", "sex": "woman", "#alibaba_rds_row_id#": 15 } }, "sequenceId": "1620457642589000001", "timestamp": { "eventTime": 1620458077000, "systemTime": 1620458077779, "checkpointTime": 1620458077000 }, "op": "UPDATE_AFTER", "ddl": null }, "version": "0.0.1" }'
# "1 つの Kafka レコードが生成されます" selected: one UPDATE_AFTER with before and after
S002_UPDATE_IN_ONE = '{ "schema": { "dataColumn": [ { "name": "name", "type": "STRING" }, { "name": "job", "type": "STRING" }, { "name": "sex", "type": "STRING" }, { "name": "#alibaba_rds_row_id#", "type": "LONG" } ], "primaryKey": null, "source": { "dbType": "MySQL", "dbName": "pkset_test", "tableName": "pkset_test_no_pk" } }, "payload": { "before": { "dataColumn": { "name": "name11", "job": "job11", "sex": "man", "#alibaba_rds_row_id#": 15 } }, "after": { "dataColumn": { "name": "name11", "job": "job11", "sex": "woman", "#alibaba_rds_row_id#": 15 } }, "sequenceId": "1620457642589000001", "timestamp": { "eventTime": 1620458077000, "systemTime": 1620458077779, "checkpointTime": 1620458077000 }, "op": "UPDATE_AFTER", "ddl": null }, "version": "0.0.1" }'
# "ソースからのデータ削除"
S002_DELETE = '{ "schema": { "dataColumn": [ { "name": "name", "type": "STRING" }, { "name": "job", "type": "STRING" }, { "name": "sex", "type": "STRING" }, { "name": "#alibaba_rds_row_id#", "type": "LONG" } ], "primaryKey": null, "source": { "dbType": "MySQL", "dbName": "pkset_test", "tableName": "pkset_test_no_pk" } }, "payload": { "before": { "dataColumn": { "name": "name11", "job": "job11", "sex": "woman", "#alibaba_rds_row_id#": 15 } }, "after": null, "sequenceId": "1620457642589000002", "timestamp": { "eventTime": 1620458266000, "systemTime": 1620458266101, "checkpointTime": 1620458266000 }, "op": "DELETE", "ddl": null }, "version": "0.0.1" }'
# "同期ノードによって生成されるハートビートメッセージの形式" (pretty-printed in the seed: joined on one line)
S002_HEARTBEAT = json.dumps(
    {
        "schema": {"dataColumn": None, "primaryKey": None, "source": None},
        "payload": {
            "before": None,
            "after": None,
            "sequenceId": None,
            "timestamp": {"eventTime": 1620457659000, "checkpointTime": 1620457659000},
            "op": "MHEARTBEAT",
            "ddl": None,
        },
        "version": "0.0.1",
    }
)

# --- seed 000 (DataHub BLOB), comments removed ----------------------------------------------
S000_UPDATE_BEFOR = '{ "schema": { "dataColumn": [ { "name": "id", "type": "LONG"}, { "name": "name", "type": "STRING"}, { "name": "comment", "type": "STRING"}], "source": { "dbName": "yunshi_db", "dbType": "MySQL", "tableName": "t_shiyu_pk"}, "primaryKey": [ "id", "name"]}, "payload": { "op": "UPDATE_BEFOR", "before": { "dataColumn": { "name": "joe", "comment": "comment", "id": 1}}, "sequenceId": "1605339516000000005", "timestamp": { "eventTime": 1605339934000, "systemTime": 1605339934951, "checkpointTime": 1605339934000}}, "version": "0.0.1"}'
S000_UPDATE_AFTER = '{ "schema": { "dataColumn": [ { "name": "id", "type": "LONG"}, { "name": "name", "type": "STRING"}, { "name": "comment", "type": "STRING"}], "source": { "dbName": "yunshi_db", "dbType": "MySQL", "tableName": "t_shiyu_pk"}, "primaryKey": [ "id", "name"]}, "payload": { "op": "UPDATE_AFTER", "after": { "dataColumn": { "name": "joe", "comment": "com1", "id": 1}}, "sequenceId": "1605339516000000005", "timestamp": { "eventTime": 1605339934000, "systemTime": 1605339934951, "checkpointTime": 1605339934000}}, "version": "0.0.1"}'
S000_HEARTBEAT = '{ "schema": {}, "payload": { "op": "MHEARTBEAT", "timestamp": { "eventTime": 1605339953629, "checkpointTime": 1605339953629}}, "version": "0.0.1"}'
S000_DDL_META = (
    "rO0ABXNyACljb20uYWxpYmFiYS5kaS5wbHVnaW4uY2VudGVyLm1ldGEuRERMTWV0YQLb5Cx/YWXtAgACTAAHZGRs"
    "VGV4dHQAEkxqYXZhL2xhbmcvU3RyaW5nO0wACXN0YXRlbWVudHQAKkxjb20vYWxpYmFiYS9mYXN0c3FsL3NxbC9h"
    "c3QvU1FMU3RhdGVtZW50O3hwdAAtYWx0ZXIgdGFibGUgdF9zaGl5dV9ub3BrIGFkZCBjb2x1bW4gaG9sbyB0ZXh0"
    "c3IAPGNvbS5hbGliYWJhLmZhc3RzcWwuc3FsLmFzdC5zdGF0ZW1lbnQuU1FMQWx0ZXJUYWJsZVN0YXRlbWVudBQP"
    "P3vMUl2cAgAPSQAHYnVja2V0c1oABmlnbm9yZVoAF2ludmFsaWRhdGVHbG9iYWxJbmRleGVzWgAPbWVyZ2VTbWFs"
    "bEZpbGVzWgAHb2ZmbGluZVoABm9ubGluZVoADnJlbW92ZVBhdGl0aW5nWgATdXBkYXRlR2xvYmFsSW5kZXhlc1oA"
    "D3VwZ3JhZGVQYXRpdGluZ0wAC2NsdXN0ZXJlZEJ5dAAQTGphdmEvdXRpbC9MaXN0O0wABWl0ZW1zcQB+AAZMAAlw"
    "YXJ0aXRpb250ACxMY29tL2FsaWJhYmEvZmFzdHNxbC9zcWwvYXN0L1NRTFBhcnRpdGlvbkJ5O0wACHNvcnRlZEJ5"
    "cQB+AAZMAAx0YWJsZU9wdGlvbnNxAH4ABkwAC3RhYmxlU291cmNldAA6TGNvbS9hbGliYWJhL2Zhc3RzcWwvc3Fs"
    "L2FzdC9zdGF0ZW1lbnQvU1FMRXhwclRhYmxlU291cmNlO3hyACxjb20uYWxpYmFiYS5mYXN0c3FsLnNxbC5hc3Qu"
    "U1FMU3RhdGVtZW50SW1wbEOxUUDVCJMGAgADWgAJYWZ0ZXJTZW1pTAAGZGJUeXBldAAcTGNvbS9hbGliYWJhL2Zh"
    "c3RzcWwvRGJUeXBlO0wACWhlYWRIaW50c3EAfgAGeHIAKWNvbS5hbGliYWJhLmZhc3RzcWwuc3FsLmFzdC5TUUxP"
    "YmplY3RJbXBs5LvqLFggFVECAAVJAAxzb3VyY2VDb2x1bW5JAApzb3VyY2VMaW5lTAAKYXR0cmlidXRlc3QAD0xq"
    "YXZhL3V0aWwvTWFwO0wABGhpbnR0ACxMY29tL2FsaWJhYmEvZmFzdHNxbC9zcWwvYXN0L1NRTENvbW1lbnRIaW50"
    "O0wABnBhcmVudHQAJ0xjb20vYWxpYmFiYS9mYXN0c3FsL3NxbC9hc3QvU1FMT2JqZWN0O3hwAAAAAAAAAABwcHAA"
    "fnIAGmNvbS5hbGliYWJhLmZhc3RzcWwuRGJUeXBlAAAAAAAAAAASAAB4cgAOamF2YS5sYW5nLkVudW0AAAAAAAAA"
    "ABIAAHhwdAAFbXlzcWxwAAAAAAAAAAAAAAAAc3IAE2phdmEudXRpbC5BcnJheUxpc3R4gdIdmcdhnQMAAUkABHNp"
    "emV4cAAAAAB3BAAAAAB4c3EAfgAUAAAAAXcEAAAAAXNyADxjb20uYWxpYmFiYS5mYXN0c3FsLnNxbC5hc3Quc3Rh"
    "dGVtZW50LlNRTEFsdGVyVGFibGVBZGRDb2x1bW4l5T6CFe//BAIABloAB2Nhc2NhZGVaAAVmaXJzdEwAC2FmdGVy"
    "Q29sdW1udAAlTGNvbS9hbGliYWJhL2Zhc3RzcWwvc3FsL2FzdC9TUUxOYW1lO0wAB2NvbHVtbnNxAH4ABkwAC2Zp"
    "cnN0Q29sdW1ucQB+ABhMAAhyZXN0cmljdHQAE0xqYXZhL2xhbmcvQm9vbGVhbjt4cQB+AAsAAAAAAAAAAHBwcQB+"
    "AA8AAHBzcQB+ABQAAAABdwQAAAABc3IAOWNvbS5hbGliYWJhLmZhc3RzcWwuc3FsLmFzdC5zdGF0ZW1lbnQuU1FM"
    "Q29sdW1uRGVmaW5pdGlvbst0gLKZ0qAtAgAmWgANYXV0b0luY3JlbWVudFoADGRpc2FibGVJbmRleFoAB3ByZVNv"
    "cnRJAAxwcmVTb3J0T3JkZXJaAAZzdG9yZWRaAAd2aXJ0dWFsWgAHdmlzaWJsZUwACGFubkluZGV4dAApTGNvbS9h"
    "bGliYWJhL2Zhc3RzcWwvc3FsL2FzdC9TUUxBbm5JbmRleDtMAAZhc0V4cHJ0ACVMY29tL2FsaWJhYmEvZmFzdHNx"
    "bC9zcWwvYXN0L1NRTEV4cHI7TAALY2hhcnNV4cHJxAH4AHkwADWNvbFByb3BlcnRpZXNxAH4ABkwAC2NvbGxhdGV"
    "FeHBycQB+AB5MAAdjb21tZW50cQB+AB5MAAtjb21wcmVzc2lvbnQALkxjb20vYWxpYmFiYS9mYXN0c3FsL3NxbC9"
    "hc3QvZXhwci9TUUxDaGFyRXhwcjtMAAtjb25zdHJhaW50c3EAfgAGTAAIZGF0YVR5cGV0AClMY29tL2FsaWJhYmE"
    "vZmFzdHNxbC9zcWwvYXN0L1NRTERhdGFUeXBlO0wABmRiVHlwZXEAfgAKTAALZGVmYXVsdEV4cHJxAH4AHkwACWR"
    "lbGltaXRlcnEAfgAeTAASZGVsaW1pdGVyVG9rZW5pemVycQB+AB5MAAZlbmFibGVxAH4AGUwABmVuY29kZXEAfgA"
    "fTAAGZm9ybWF0cQB+AB5MABBnZW5lcmF0ZWRBbGF3c0FzcQB+AB5MAAhpZGVudGl0eXQARExjb20vYWxpYmFiYS9"
    "mYXN0c3FsL3NxbC9hc3Qvc3RhdGVtZW50L1NRTENvbHVtbkRlZmluaXRpb24kSWRlbnRpdHk7TAASanNvbkluZGV"
    "4QXR0cnNFeHBycQB+AB5MAAhtYXBwZWRCeXEAfgAGTAAEbmFtZXEAfgAYTAAMbmxwVG9rZW5pemVycQB+AB5MAAh"
    "vblVwZGF0ZXEAfgAeTAAEcmVseXEAfgAZTAAMc2VxdWVuY2VUeXBldAAvTGNvbS9hbGliYWJhL2Zhc3RzcWwvc3F"
    "sL2FzdC9BdXRvSW5jcmVtZW50VHlwZTtMAARzdGVwcQB+AB5MAAdzdG9yYWdlcQB+AB5MAAl1bml0Q291bnRxAH4"
    "AHkwACXVuaXRJbmRleHEAfgAeTAAIdmFsaWRhdGVxAH4AGUwACXZhbHVlVHlwZXEAfgAeeHEAfgALAAAAAAAAAAB"
    "wcHEAfgAaAAAAAAAAAAAAAHBwcHBwcHBzcQB+ABQAAAAAdwQAAAAAeHNyADpjb20uYWxpYmFiYS5mYXN0c3FsLnN"
    "xbC5hc3Quc3RhdGVtZW50LlNRTENoYXJhY3RlckRhdGFUeXBlqtJac/d+04cCAAVaAAloYXNCaW5hcnlMAAtjaGF"
    "yU2V0TmFtZXEAfgABTAAIY2hhclR5cGVxAH4AAUwAB2NvbGxhdGVxAH4AAUwABWhpbnRzcQB+AAZ4cgArY29tLmF"
    "saWJhYmEuZmFzdHNxbC5zcWwuYXN0LlNRTERhdGFUeXBlSW1wbEWL29pc1gZFAgAJSgAObmFtZUhhc2hDb2RlNjR"
    "aAAh1bnNpZ25lZFoAEXdpdGhMb2NhbFRpbWVab25lWgAIemVyb2ZpbGxMAAlhcmd1bWVudHNxAH4ABkwABmRiVHl"
    "wZXEAfgAKTAAHaW5kZXhCeXEAfgAeTAAEbmFtZXEAfgABTAAMd2l0aFRpbWVab25lcQB+ABl4cQB+AAsAAAAAAAA"
    "AAHBwcQB+ACP6BPTvGZVAfgAAAHNxAH4AFAAAAAB3BAAAAAB4cHB0AAR0ZXh0cABwcHBwcQB+ABJwcHBwcHBwcHB"
    "wc3IAMmNvbS5hbGliYWJhLmZhc3RzcWwuc3FsLmFzdC5leHByLlNRTElkZW50aWZpZXJFeHBy3DXH1zvWbgkCAAR"
    "KAApoYXNoQ29kZTY0TAAEbmFtZXEAfgABTAAOcmVzb2x2ZWRDb2x1bW5xAH4ADkwAE3Jlc29sdmVkT3duZXJPYmp"
    "lY3RxAH4ADnhyACdjb20uYWxpYmFiYS5mYXN0c3FsLnNxbC5hc3QuU1FMRXhwckltcGxs2ypmFJxWrQIAAHhxAH4"
    "ACwAAAAAAAAAAcHBwQCnxzH5tIDl0AARob2xvcHBwcHBwcHBwcHBweHBweHBzcQB+ABQAAAAAdwQAAAAAeHNxAH4"
    "AFAAAAAB3BAAAAAB4c3IAOGNvbS5hbGliYWJhLmZhc3RzcWwuc3FsLmFzdC5zdGF0ZW1lbnQuU1FMRXhwclRhYmx"
    "lU291cmNlRHD7eYJ4eswCAAVMAAdjb2x1bW5zcQB+AAZMAARleHBycQB+AB5MAApwYXJ0aXRpb25zcQB+AAZMAAh"
    "zYW1wbGluZ3QAOExjb20vYWxpYmFiYS9mYXN0c3FsL3NxbC9hc3Qvc3RhdGVtZW50L1NRTFRhYmxlU2FtcGxpbmc"
    "7TAAMc2NoZW1hT2JqZWN0dAAxTGNvbS9hbGliYWJhL2Zhc3RzcWwvc3FsL3JlcG9zaXRvcnkvU2NoZW1hT2JqZWN"
    "0O3hyADhjb20uYWxpYmFiYS5mYXN0c3FsLnNxbC5hc3Quc3RhdGVtZW50LlNRTFRhYmxlU291cmNlSW1wbAqEMen"
    "Tm5zUAgAESgAPYWxpYXNIYXNoQ29kZTY0TAAFYWxpYXNxAH4AAUwACWZsYXNoYmFja3EAfgAeTAAFaGludHNxAH4"
    "ABnhxAH4ACwAAAAAAAAAAcHBwAAAAAAAAAABwcHBwc3EAfgAqAAAAAAAAAABwcHEAfgA0NH7o4UvP9Dt0AAx0X3N"
    "oaXl1X25vcGtwcHBwcA=="
)
S000_ALTER = (
    '{ "schema": { "source": { "dbName": "yunshi_db", "dbType": "MySQL", "tableName": "t_shiyu_nopk"}}, '
    '"payload": { "op": "ALTER", "sequenceId": "1605339516000000035", "ddl": { "text": "alter table t_shiyu_nopk add column holo text", '
    '"ddlMeta": "' + S000_DDL_META + '"}, "timestamp": { "eventTime": 1605342109000, "systemTime": 1605342109259, '
    '"checkpointTime": 1605342109000}}, "version": "0.0.1"}'
)


def msg(op, after=None, before=None, columns=None, pk=None, source=None, seq="1605339516000000100", scn=None, event_time=1605342200000, ddl=None):
    """A hand-written message on the seed-002 template (``Kafkaメッセージの形式``)."""
    payload = {"before": None if before is None else {"dataColumn": before},
               "after": None if after is None else {"dataColumn": after},
               "sequenceId": seq, "op": op,
               "timestamp": {"eventTime": event_time, "systemTime": event_time + 500, "checkpointTime": event_time},
               "ddl": None if ddl is None else {"text": ddl, "ddlMeta": "rO0ABQ=="}}
    if scn is not None:
        payload["scn"] = scn
    src = source if source is not None else {"dbType": "MySQL", "dbName": "yunshi_db", "tableName": "t_types"}
    return json.dumps({"schema": {"dataColumn": columns, "primaryKey": pk, "source": src}, "payload": payload, "version": "0.0.1"})


TYPES_COLS = [{"name": "id", "type": "LONG"}, {"name": "flag", "type": "BOOLEAN"}, {"name": "price", "type": "DOUBLE"},
              {"name": "ts", "type": "DATE"}, {"name": "binData", "type": "BYTES"}, {"name": "note", "type": "STRING"}]
# Oracle source: the seed-002 template's columns (schemaName, rowid, scn); no primary key
ORACLE = msg(
    "INSERT",
    columns=[{"name": "id", "type": "LONG"}, {"name": "name", "type": "STRING"}, {"name": "binData", "type": "BYTES"},
             {"name": "ts", "type": "DATE"}, {"name": "rowid", "type": "STRING"}],
    # the template's values; binData is base64 of the seed's own example text "Test text123"
    after={"id": 222, "name": "donald", "binData": "VGVzdCB0ZXh0MTIz", "ts": 1590315269000, "rowid": "AAIUMPAAFAACxExAAE"},
    source={"dbType": "Oracle", "dbVersion": "1.0.0", "dbName": "myDatabase", "schemaName": "mySchema", "tableName": "tableName"},
    seq="1620457642589000007", scn="2049128371",
)
# BOOLEAN (JSON true/false), DOUBLE as a JSON number, DATE, BYTES, a NULL value
TYPED = msg("INSERT", columns=TYPES_COLS, pk=["id"],
            after={"id": 7, "flag": True, "price": 3.25, "ts": 1605339934000, "binData": "AAEC/w==", "note": None})
TYPED_FALSE = msg("UPDATE_AFTER", columns=TYPES_COLS, pk=["id"], seq="1605339516000000101",
                  before={"id": 7, "flag": True, "price": 3.25, "ts": 1605339934000, "binData": "AAEC/w==", "note": None},
                  after={"id": 7, "flag": False, "price": "-0.5", "ts": 0, "binData": "", "note": "x"})
TRUNCATE = msg("TRUNCATE", source={"dbType": "MySQL", "dbName": "yunshi_db", "tableName": "t_shiyu_nopk"},
               seq="1605339516000000036", ddl="truncate table t_shiyu_nopk")
TX_BEGIN = msg("TRANSACTION_BEGIN", source=None, seq="1605339516000000040")
TX_END_NO_SEQ = json.dumps({"schema": {}, "payload": {"op": "TRANSACTION_END", "timestamp": {"eventTime": 1605342300000}}, "version": "0.0.1"})
GTID = msg("GTID", source=None, seq="1605339516000000041")
XACOMMIT = msg("XACOMMIT", source=None, seq="1605339516000000042")

SEED_LINES = [
    S002_INSERT,  # 1
    S002_UPDATE_BEFOR,  # 2
    S002_UPDATE_AFTER,  # 3
    S002_UPDATE_IN_ONE,  # 4
    S002_DELETE,  # 5
    S002_HEARTBEAT,  # 6
    S000_UPDATE_BEFOR,  # 7
    S000_UPDATE_AFTER,  # 8
    S000_HEARTBEAT,  # 9
    S000_ALTER,  # 10
    TRUNCATE,  # 11
    ORACLE,  # 12
    TYPED,  # 13
    TYPED_FALSE,  # 14
    TX_BEGIN,  # 15
    TX_END_NO_SEQ,  # 16
    GTID,  # 17
    XACOMMIT,  # 18
    " " + S000_UPDATE_AFTER,  # 19 leading space, as in Paimon's event-update-in-one.txt
]

GOOD = msg("INSERT", columns=TYPES_COLS[:1] + TYPES_COLS[-1:], pk=["id"], after={"id": 1, "note": "ok"})
BAD_LINES = [
    (GOOD, None),  # 1
    (S002_INSERT[:120], "MALFORMED_JSON"),  # 2 truncated JSON
    ("\u0000\u0001 not json at all", "MALFORMED_JSON"),  # 3
    (S002_DELETE, None),  # 4
    ('{"schema": {}, "payload": "INSERT", "version": "0.0.1"}', "SCHEMA_MISMATCH"),  # 5 payload is a string
    (json.dumps([json.loads(GOOD)]), "NOT_AN_OBJECT"),  # 6
    (msg("UPSERT", columns=TYPES_COLS[:1], after={"id": 1}), "UNKNOWN_OP"),  # 7
    (msg("insert", columns=TYPES_COLS[:1], after={"id": 1}), "UNKNOWN_OP"),  # 8 ops are case-sensitive
    (msg("UPDATE", columns=TYPES_COLS[:1], after={"id": 1}), "UNKNOWN_OP"),  # 9
    (msg("INSERT", columns=TYPES_COLS[:1], pk=["id"], after={"id": "abc"}), "BAD_VALUE"),  # 10 LONG "abc"
    (msg("INSERT", columns=TYPES_COLS[3:4], after={"ts": "yesterday"}), "BAD_VALUE"),  # 11 DATE
    (msg("INSERT", columns=TYPES_COLS[1:2], after={"flag": "maybe"}), "BAD_VALUE"),  # 12 BOOLEAN
    (msg("UPDATE_BEFOR", columns=TYPES_COLS[:1], before={"id": 1.5}), "BAD_VALUE"),  # 13 checked though dropped
    (msg("INSERT", columns=TYPES_COLS[:1], after={"id": 1}, seq=None), "BAD_POSITION"),  # 14
    (msg("INSERT", columns=TYPES_COLS[:1], after={"id": 1}, seq="12a"), "BAD_POSITION"),  # 15
    (msg("ALTER", seq=None, ddl="alter table t add c int"), "BAD_POSITION"),  # 16
    (json.dumps({"schema": {}, "payload": {"op": "MHEARTBEAT", "timestamp": {}}}), "BAD_POSITION"),  # 17
    (msg("INSERT", columns=TYPES_COLS[:1], after={"id": 1}, source={"dbName": "db"}), "MISSING_TABLE"),  # 18
    (msg("DELETE", columns=TYPES_COLS[:1], after={"id": 1}), "MISSING_IMAGE"),  # 19 delete without before
    (msg("INSERT", columns=TYPES_COLS[:1], after={}), "MISSING_IMAGE"),  # 20
    ('{"schema": {}, "payload": {"sequenceId": "1"}}', "SCHEMA_MISMATCH"),  # 21 no op
    ('{"schema": {}, "version": "0.0.1"}', "SCHEMA_MISMATCH"),  # 22 no payload
    (GOOD, None),  # 23
]


def _decode_lines(spark, path):
    """Decode the file(s) at ``path`` once; returns {(file name, line): row}, rows with
    ``events`` as lists of dicts."""
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.sources.files import read_lines

    raw = read_lines(spark, [str(path)])
    rows = formats.get(FMT).decode(raw, DecodeOptions()).collect()
    out = {}
    for r in rows:
        d = r.asDict(recursive=True)
        out[(d["source_record"]["file"].rsplit("/", 1)[-1], d["source_record"]["line"])] = d
    return out


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    """Every file of this module in one folder, decoded in one Spark job."""
    d = tmp_path_factory.mktemp("dataworks_json")
    for name in ("event-insert.txt", "event-update-in-one.txt", "event-delete.txt"):
        fixture_lines(f"{PAIMON}/{name}", d)
    (d / "seeds.jsonl").write_text("\n".join(SEED_LINES) + "\n", encoding="utf-8")
    (d / "bad.jsonl").write_text("\n".join(text for text, _ in BAD_LINES) + "\n", encoding="utf-8")
    return _decode_lines(spark, d)


@pytest.fixture(scope="module")
def paimon(decoded):
    return {name: row for (name, _line), row in decoded.items() if name.startswith("event-")}


@pytest.fixture(scope="module")
def seeds(decoded):
    return {line: row for (name, line), row in decoded.items() if name == "seeds.jsonl"}


@pytest.fixture(scope="module")
def bad(decoded):
    return {line: row for (name, line), row in decoded.items() if name == "bad.jsonl"}


def one(row):
    assert row["error_code"] is None, (row["error_code"], row["error_message"])
    assert len(row["events"]) == 1, row["events"]
    return row["events"][0]


def pos(*order, text):
    return {"order": [Decimal(o) for o in order], "text": text}


PAIMON_COLUMNS = [
    {"name": "id", "source_type": "LONG", "spark_type": "bigint", "precision": None, "scale": None, "nullable": None},
    {"name": "val", "source_type": "DOUBLE", "spark_type": "double", "precision": None, "scale": None, "nullable": None},
    {"name": "name", "source_type": "STRING", "spark_type": "string", "precision": None, "scale": None, "nullable": None},
    {"name": "create_time", "source_type": "DATE", "spark_type": "timestamp", "precision": None, "scale": None, "nullable": None},
]


# --- real messages (Apache Paimon, kafka/aliyun/table/event) ---------------------------------

def test_paimon_insert_full_load_row(paimon):
    # event-insert.txt: a full-load row: sequenceId "-1", eventTime -1
    e = one(paimon["event-insert.txt"])
    assert (e["format"], e["kind"], e["op"]) == ("dataworks-json", "data", "c")
    assert (e["database"], e["schema"], e["table"]) == ("bigdata_test", None, "sync_test_table")
    assert e["primary_key"] == ["id"]
    assert e["before"] is None
    # create_time 1731661114000 ms = 1731661114 s = 2024-11-15 08:58:34 UTC
    assert e["after"] == {"id": "2", "val": "1.100000", "name": "a", "create_time": "2024-11-15 08:58:34.000000"}
    assert e["present"] is None
    assert e["columns"] == PAIMON_COLUMNS
    assert e["position"] == pos(-1, text="-1")
    assert e["event_time_ms"] is None
    assert e["source_record"]["line"] == 1  # fixture_lines drops the 17-line licence header


def test_paimon_update_in_one(paimon):
    # event-update-in-one.txt (its line starts with a space): UPDATE_AFTER with both images
    e = one(paimon["event-update-in-one.txt"])
    assert (e["kind"], e["op"], e["table"], e["primary_key"]) == ("data", "u", "sync_test_table", ["id"])
    assert e["before"] == {"id": "2", "val": "1.100000", "name": "a", "create_time": "2024-11-15 08:58:34.000000"}
    assert e["after"] == {"id": "2", "val": "2.200000", "name": "a", "create_time": "2024-11-15 08:58:34.000000"}
    assert e["position"] == pos(1731663842292000001, text="1731663842292000001")
    assert e["event_time_ms"] == 1731662097000


def test_paimon_delete(paimon):
    e = one(paimon["event-delete.txt"])
    assert (e["kind"], e["op"], e["database"], e["table"]) == ("data", "d", "bigdata_test", "sync_test_table")
    assert e["before"] == {"id": "1", "val": "1.100000", "name": "a", "create_time": "2024-11-15 08:58:34.000000"}
    assert e["after"] is None
    assert e["position"] == pos(1731663842292000000, text="1731663842292000000")
    assert e["event_time_ms"] == 1731662085000
    # the delete's position (…000) orders before the update's (…001) and after the full load (-1)
    assert Decimal(-1) < e["position"]["order"][0] < Decimal(1731663842292000001)


# --- seed samples ------------------------------------------------------------------------------

def test_seed002_insert_without_primary_key_uses_row_id(seeds):
    e = one(seeds[1])
    assert (e["op"], e["database"], e["schema"], e["table"]) == ("c", "pkset_test", None, "pkset_test_no_pk")
    assert e["primary_key"] == ["#alibaba_rds_row_id#"]
    assert e["after"] == {"name": "name11", "job": "job11", "sex": "man", "#alibaba_rds_row_id#": "15"}
    assert e["position"] == pos(1620457642589000000, text="1620457642589000000")
    assert e["event_time_ms"] == 1620457896000


def test_seed002_split_update_halves_decode_to_one_sided_updates(seeds):
    # the before half: op u, before image only (paired with the after half by the applier)
    b = one(seeds[2])
    assert (b["kind"], b["op"], b["after"]) == ("data", "u", None)
    assert b["before"]["#alibaba_rds_row_id#"] == "15"
    e = one(seeds[3])
    assert b["position"] == e["position"]
    assert (e["kind"], e["op"], e["primary_key"]) == ("data", "u", ["#alibaba_rds_row_id#"])
    assert e["before"] is None
    assert e["after"] == {"name": "name11", "job": "job11", "sex": "woman", "#alibaba_rds_row_id#": "15"}
    assert e["position"] == pos(1620457642589000001, text="1620457642589000001")
    assert e["event_time_ms"] == 1620458077000


def test_seed002_update_in_one_record_and_delete(seeds):
    u = one(seeds[4])
    assert u["op"] == "u"
    assert u["before"]["sex"] == "man" and u["after"]["sex"] == "woman"
    assert u["position"] == pos(1620457642589000001, text="1620457642589000001")
    d = one(seeds[5])
    assert (d["op"], d["after"]) == ("d", None)
    assert d["before"] == {"name": "name11", "job": "job11", "sex": "woman", "#alibaba_rds_row_id#": "15"}
    assert d["position"] == pos(1620457642589000002, text="1620457642589000002")


def test_seed_heartbeats(seeds):
    # seed 002: schema fields null, sequenceId null; seed 000: "schema": {} and no sequenceId
    for line, ms in ((6, 1620457659000), (9, 1605339953629)):
        e = one(seeds[line])
        assert (e["kind"], e["op"], e["database"], e["schema"], e["table"]) == ("heartbeat", None, None, None, None)
        assert e["event_time_ms"] == ms
        assert e["position"] == pos(ms, text=f"eventTime:{ms}")
        assert (e["before"], e["after"], e["primary_key"], e["columns"]) == (None, None, None, None)


def test_seed000_split_update_with_primary_key(seeds):
    b = one(seeds[7])
    assert (seeds[7]["error_code"], b["op"], b["after"]) == (None, "u", None)
    e = one(seeds[8])
    assert (e["op"], e["database"], e["table"], e["primary_key"]) == ("u", "yunshi_db", "t_shiyu_pk", ["id", "name"])
    assert (e["before"], e["after"]) == (None, {"name": "joe", "comment": "com1", "id": "1"})
    assert e["position"] == pos(1605339516000000005, text="1605339516000000005")


def test_seed000_ddl(seeds):
    e = one(seeds[10])
    assert (e["kind"], e["op"], e["database"], e["table"]) == ("ddl", None, "yunshi_db", "t_shiyu_nopk")
    assert e["ddl"] == "alter table t_shiyu_nopk add column holo text"
    assert e["position"] == pos(1605339516000000035, text="1605339516000000035")
    assert e["event_time_ms"] == 1605342109000
    assert (e["columns"], e["primary_key"], e["before"], e["after"]) == (None, None, None, None)


def test_truncate(seeds):
    # hand-written on the seed-000 DDL sample's table
    e = one(seeds[11])
    assert (e["kind"], e["op"], e["database"], e["table"]) == ("data", "t", "yunshi_db", "t_shiyu_nopk")
    assert (e["before"], e["after"]) == (None, None)
    assert e["position"] == pos(1605339516000000036, text="1605339516000000036")


def test_oracle_schema_rowid_scn_bytes_date(seeds):
    # hand-written on the seed-002 message template (Oracle: schemaName, rowid column, scn)
    e = one(seeds[12])
    assert (e["op"], e["database"], e["schema"], e["table"]) == ("c", "myDatabase", "mySchema", "tableName")
    assert e["primary_key"] == ["rowid"]
    assert e["after"] == {
        "id": "222",
        "name": "donald",
        "binData": "VGVzdCB0ZXh0MTIz",  # base64 of "Test text123", kept as base64 (canonical binary)
        "ts": "2020-05-24 10:14:29.000000",  # 1590315269000 ms
        "rowid": "AAIUMPAAFAACxExAAE",
    }
    assert e["position"] == pos(1620457642589000007, 2049128371, text="1620457642589000007:2049128371")
    assert [(c["name"], c["spark_type"]) for c in e["columns"]] == [
        ("id", "bigint"), ("name", "string"), ("binData", "binary"), ("ts", "timestamp"), ("rowid", "string")]


def test_boolean_double_bytes_null_values(seeds):
    e = one(seeds[13])
    assert e["after"] == {"id": "7", "flag": "true", "price": "3.25", "ts": "2020-11-14 07:45:34.000000",
                          "binData": "AAEC/w==", "note": None}
    u = one(seeds[14])
    assert u["before"] == e["after"]
    assert u["after"] == {"id": "7", "flag": "false", "price": "-0.5", "ts": "1970-01-01 00:00:00.000000",
                          "binData": "", "note": "x"}


def test_transaction_markers_and_skipped_ops(seeds):
    b = one(seeds[15])
    assert (b["kind"], b["op"], b["tx_id"], b["table"]) == ("tx_begin", None, None, None)
    assert b["position"] == pos(1605339516000000040, text="1605339516000000040")
    e = one(seeds[16])
    assert e["kind"] == "tx_end"
    assert e["position"] == pos(1605342300000, text="eventTime:1605342300000")
    for line in (17, 18):  # GTID, XACOMMIT: nothing to apply, not an error
        assert (seeds[line]["error_code"], seeds[line]["events"]) == (None, [])


def test_every_seed_record_has_one_output_row(seeds):
    assert sorted(seeds) == list(range(1, len(SEED_LINES) + 1))


def test_leading_space_before_the_json(seeds):
    # Paimon's event-update-in-one.txt line starts with a space; conftest.fixture_lines strips it
    # together with the licence header, so the leading space is checked here
    e = one(seeds[19])
    assert (e["op"], e["after"]) == ("u", {"name": "joe", "comment": "com1", "id": "1"})


# --- bad input -----------------------------------------------------------------------------

def test_bad_records_rejected_with_their_code(bad):
    assert sorted(bad) == list(range(1, len(BAD_LINES) + 1))  # one output row per input record
    for line, (_text, code) in enumerate(BAD_LINES, start=1):
        row = bad[line]
        assert row["error_code"] == code, (line, row["error_code"], row["error_message"])
        if code is None:
            assert len(row["events"]) == 1
        else:
            assert row["events"] == [] and row["error_message"]
            assert row["raw_value"] is not None
    assert one(bad[1])["after"] == {"id": "1", "note": "ok"}
    assert one(bad[4])["op"] == "d"


# --- registry, alias, DataHub BLOB bytes -----------------------------------------------------

def test_registry_and_alias():
    from cdclake import formats

    assert formats.get("datahub-blob") is formats.get("dataworks-json")
    assert "datahub-blob" in formats.names() and "dataworks-json" in formats.names()


def test_datahub_blob_bytes_and_tombstone(spark):
    # a DataHub BLOB record is the JSON as UTF-8 bytes (seed 000, "BLOB データのデータのシリアル化")
    from cdclake import formats
    from cdclake.formats.base import DecodeOptions
    from cdclake.model import RAW_SCHEMA

    def rec(value, offset):
        return (None, value, (None, 0, offset, None, None, None, None))

    raw = spark.createDataFrame(
        [rec(S000_UPDATE_AFTER.encode("utf-8"), 0), rec(None, 1), rec(b"\xff\xfe\x00{", 2)], RAW_SCHEMA
    )
    rows = {r.source_record.offset: r for r in formats.get("datahub-blob").decode(raw, DecodeOptions()).collect()}
    assert rows[0].error_code is None and rows[0].events[0].op == "u"
    assert rows[0].events[0].after == {"name": "joe", "comment": "com1", "id": "1"}
    assert (rows[1].error_code, rows[1].events) == (None, [])  # tombstone: nothing, not an error
    assert rows[2].error_code == "MALFORMED_JSON" and rows[2].raw_value == b"\xff\xfe\x00{"


def test_detect_score():
    from cdclake import formats

    dec = formats.get(FMT)
    assert dec.detect_score([S002_INSERT.encode(), S000_HEARTBEAT.encode()]) == 1.0
    assert dec.detect_score([b'{"data": [], "type": "INSERT", "isDdl": false}', b"x"]) == 0.0
