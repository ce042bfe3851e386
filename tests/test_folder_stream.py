"""A folder read as a stream (``--input DIR --checkpoint DIR``): the files there are read once
each in bounded micro-batches, a file that lands later is picked up by the next run, hidden
files are skipped, and the tables equal one ingest of all the files (real fixture: Flink's
canal-data.txt, see shared/fixtures/SOURCES.md)."""

from __future__ import annotations

from cdclake.pipeline import IngestConfig, ingest
from cdclake.stream import StreamConfig, run_stream
from tests.conftest import fixture_lines
from tests.oracle import read_lake_table


def test_files_are_read_once_each_as_they_land(spark, tmp_path):
    lines = [ln for ln in fixture_lines("canal-json/apache-flink/canal-data.txt", tmp_path).read_text().splitlines() if ln.strip()]
    third = len(lines) // 3
    parts = [lines[:third], lines[third:2 * third], lines[2 * third:]]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for k, part in enumerate(parts[:2]):
        (inbox / f"part{k}.jsonl").write_text("\n".join(part) + "\n")
    (inbox / ".part9.jsonl.tmp").write_text("not json\n")  # a file still being written: skipped

    def run():
        config = StreamConfig("canal-json", str(tmp_path / "lake"), str(tmp_path / "ckpt"), input_dir=str(inbox),
                              max_files_per_trigger=1, available_now=True)
        return run_stream(spark, config, out=False)

    first = run()
    # the late file has a broken line in the middle: rejected with its file and line, the rest applied
    late = [*parts[2][:1], '{"data": [{"id": ', *parts[2][1:]]
    (inbox / "part2.jsonl").write_text("\n".join(late) + "\n")
    second = run()

    assert (first.batches, second.batches) == (2, 1)
    assert (first.totals.records_in, second.totals.records_in) == (2 * third, len(lines) - 2 * third + 1)
    assert (first.totals.rejected, second.totals.rejected) == (0, 1)
    rejects = spark.read.format("delta").load(str(tmp_path / "lake/_cdclake/rejects")).collect()
    assert [(r["error_code"], r["source_record"]["file"].rsplit("/", 1)[-1], r["source_record"]["line"]) for r in rejects] == [
        ("MALFORMED_JSON", "part2.jsonl", 2)
    ]
    ingest(spark, IngestConfig("canal-json", [str(tmp_path / "canal-data.txt")], str(tmp_path / "files")))
    name = "inventory.products2"
    assert _table(spark, tmp_path / "lake" / name) == _table(spark, tmp_path / "files" / name)


def _table(spark, path):
    """The Delta table's source columns and rows (sorted by id)."""
    schema, rows = read_lake_table(spark, str(path))
    return schema, sorted(rows, key=lambda r: r["id"])
