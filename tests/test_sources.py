"""Raw records from files: every record's file and 1-based line, whether Spark reads a file as one
split (numbered by row id alone) or as many (numbered by the split aggregate)."""

from __future__ import annotations

from pathlib import Path

from cdclake.sources.files import one_split_bytes, read_lines


def _write(path: Path, n: int, blank_every: int) -> dict[int, str]:
    """A JSON-lines file of ``n`` lines, every ``blank_every``-th blank (or only spaces); returns
    line number -> text of the non-blank lines."""
    lines, want = [], {}
    for i in range(1, n + 1):
        if i % blank_every == 0:
            lines.append("   " if i % 2 else "")
        else:
            text = '{"n": %d, "pad": "%s"}' % (i, "x" * (i % 40))
            lines.append(text)
            want[i] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return want


def _read(spark, paths) -> dict[tuple[str, int], str]:
    rows = read_lines(spark, [str(p) for p in paths]).collect()
    out = {(r.source_record.file.rsplit("/", 1)[-1], r.source_record.line): r.value.decode() for r in rows}
    assert len(out) == len(rows), "two records with one (file, line)"
    return out


def test_lines_are_numbered_alike_in_one_split_and_in_many(spark, tmp_path):
    a = _write(tmp_path / "a.jsonl", 900, 7)
    b = _write(tmp_path / "b.jsonl", 300, 5)
    want_a = {("a.jsonl", n): t for n, t in a.items()}
    want_b = {("b.jsonl", n): t for n, t in b.items()}
    assert (tmp_path / "a.jsonl").stat().st_size <= one_split_bytes(spark)
    assert _read(spark, [tmp_path / "a.jsonl"]) == want_a  # one file, one split: row ids
    assert _read(spark, [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]) == {**want_a, **want_b}
    old = {k: spark.conf.get(k) for k in ("spark.sql.files.openCostInBytes", "spark.sql.files.maxPartitionBytes")}
    try:
        spark.conf.set("spark.sql.files.openCostInBytes", "1024")
        spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")
        assert one_split_bytes(spark) == 1024
        assert spark.read.text(str(tmp_path / "a.jsonl")).rdd.getNumPartitions() > 10  # many splits
        assert _read(spark, [tmp_path / "a.jsonl"]) == want_a
        assert _read(spark, [tmp_path / "b.jsonl", tmp_path / "a.jsonl"]) == {**want_a, **want_b}
    finally:
        for k, v in old.items():
            spark.conf.set(k, v)



def test_a_line_that_is_not_utf8_keeps_its_own_bytes(spark, tmp_path):
    """A JSON-lines record's value is the line's bytes as written, as a Kafka record's is: a line
    that is not UTF-8 reaches the rejects unchanged (it read as U+FFFD text before)."""
    bad = b'{"data": [\xff\xfe\x80'
    good = '{"n": 1, "s": "caf\u00e9"}'.encode("utf-8")
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(good + b"\n" + bad + b"\n")
    rows = sorted(read_lines(spark, [str(path)]).collect(), key=lambda r: r.source_record.line)
    assert [(r.source_record.line, bytes(r.value)) for r in rows] == [(1, good), (2, bad)]
