"""Each format's facts as data (issue 52): ``facts.json`` beside its decoder declares its
capabilities and names the documents they come from; no Spark."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

import pytest

from cdclake import formats
from cdclake.formats.facts import Capabilities
from cdclake.formats.json_common import loads_object

FIELDS = {f.name for f in dataclasses.fields(Capabilities)}


@pytest.mark.parametrize("decoder", formats.all_decoders(), ids=lambda d: d.name)
def test_facts_json_is_what_the_decoder_declares(decoder):
    package = type(decoder).__module__.rsplit(".", 1)[0]
    facts = json.loads(resources.files(package).joinpath("facts.json").read_text(encoding="utf-8"))
    assert facts["format"] == decoder.name
    assert set(facts) <= {"format", "sources", "capabilities", "notes", "ops", "ops_source"}
    # the op table, where the format has one, and the seed that lists it
    if "ops" in facts:
        assert facts["ops_source"].startswith("seed 00")
        meanings = {"c", "u", "d", "r", "t", "ddl", "skip", "tx_begin", "tx_end", "heartbeat"}
        if decoder.name == "shareplex-json":  # its ops name what the decoder does with a row
            meanings = {"insert", "update", "delete", "truncate", "update_before", "update_after", "drop_column"}
        assert facts["ops"] and set(facts["ops"].values()) <= meanings
    # every source is named, a seed by its file in shared/seeds
    assert facts["sources"] and all(isinstance(s, str) and s for s in facts["sources"])
    assert any(s.startswith("seed 00") for s in facts["sources"])
    assert set(facts["capabilities"]) <= FIELDS - {"sources", "notes"}
    assert set(facts.get("notes", {})) <= set(facts["capabilities"])
    caps = decoder.capabilities
    assert {k: getattr(caps, k) for k in facts["capabilities"]} == facts["capabilities"]
    assert caps.sources == tuple(facts["sources"])


def test_an_unknown_capability_is_refused():
    with pytest.raises(TypeError):
        Capabilities(key="k", column_types="t", position="p", transactions="none", ddl=False, heartbeats=False,
                     snapshot_marker="none", row_order="x")


@pytest.mark.parametrize("value, want", [
    (b'{"a": 1}', {"a": 1}), (b"[1, 2]", None), (b"null", None), (b"{not json", None), (b"\xff\xfe", None), (b"", None),
])
def test_loads_object_takes_json_objects_only(value, want):
    assert loads_object(value) == want
