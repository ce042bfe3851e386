"""The contract every registered format keeps, run over all of them (new formats join by
being registered): the decoded shape, one output row per input record, bad input rejected with
a stable code and never raised, tombstones skipped, capabilities declared, auto-detection."""

from __future__ import annotations

import pytest

from cdclake import formats
from cdclake.errors import RejectCode
from cdclake.formats.base import DecodeOptions
from cdclake.model import DECODED_SCHEMA, RAW_SCHEMA

DECODERS = formats.all_decoders()
GARBAGE = [b"", b"\x00\xff\xfe binary", b"{not json", b"[1,2,3]", b'"a string"', b"42", b"{}", b'{"unrelated": true}']


def raw_df(spark, values):
    rows = [
        (None, v, (None, None, None, None, "mem", i + 1, None)) for i, v in enumerate(values)
    ]
    return spark.createDataFrame(rows, RAW_SCHEMA)


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.name)
def test_garbage_is_rejected_one_row_per_record(spark, decoder):
    out = decoder.decode(raw_df(spark, GARBAGE), DecodeOptions())
    assert out.schema.simpleString() == DECODED_SCHEMA.simpleString()
    rows = out.orderBy("source_record.line").collect()
    assert len(rows) == len(GARBAGE)
    codes = {r.source_record.line: r.error_code for r in rows}
    known = {c.value for c in RejectCode}
    # every garbage record is either rejected with a known code or decodes to nothing at all
    for r in rows:
        assert (r.error_code in known and not r.events) or (r.error_code is None and not r.events), (decoder.name, r)
    # bytes that are neither JSON nor Avro are always rejected
    assert codes[2] in known and codes[3] in known, codes


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.name)
def test_tombstone_is_skipped(spark, decoder):
    rows = decoder.decode(raw_df(spark, [None]), DecodeOptions()).collect()
    assert len(rows) == 1 and rows[0].error_code is None and not rows[0].events


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.name)
def test_capabilities_declared(decoder):
    c = decoder.capabilities
    assert c.key and c.column_types and c.position and c.transactions and c.snapshot_marker
    assert formats.get(decoder.name) is decoder
    for alias in decoder.aliases:
        assert formats.get(alias) is decoder


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: d.name)
def test_garbage_is_not_detected_as_any_format(decoder):
    assert decoder.detect_score(GARBAGE) < 0.5
