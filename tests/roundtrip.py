"""The round-trip harness every format's tests use, and the scrambling the applier's properties share.

* :func:`decode_round_trips`: encode several examples (lists of canonical events) with a
  format's encoder, one file per example, read and decode **all the files in one Spark job**
  with the format's decoder (plus the normalisation the pipeline applies: update halves
  paired), and return, per example, the decoded events in position order next to what the
  encoder says the format carries (:meth:`Encoder.carried`). The property is
  ``decoded == carried``: every field except ``format``, ``position`` and ``source_record``,
  and the positions must sort the events back into commit order. Each example's names are
  tagged first (:func:`tag`) so that examples decoded together cannot meet (update halves pair
  by table and position, Qlik ties data messages to the metadata message of their table).
  :func:`decode_round_trip` is the one-example form.
* :func:`ingest_scrambled`: encode a simulator workload, scramble the records the way a
  transport may (units shuffled across and within batches, some duplicated), ingest the batches
  with the real pipeline into Delta tables, and compare every table with the pure-Python replay
  (:mod:`tests.oracle`) of the carried events; optionally ingest everything again (a replay)
  and compare again. Each format runs it on one fixed case (:data:`INGEST_CASES`; the replay
  for :data:`REPLAYED_AT_THE_END` formats); the applier's
  semantics over many scrambled workloads are the property of ``tests/apply/test_properties.py``.
* :func:`format_workload`: the simulator workload a format's scrambled ingest (and the
  applier property's examples shaped like that format's decoded events) may use: the
  restrictions that keep known applier gaps and oracle limits out, in one place.

Hypothesis: the profiles (``ci``: derandomized, the default; ``thorough``: random, more
examples, ``bin/test --thorough``) are registered in ``tests/conftest.py``. A property example
here is a whole *batch* of workloads run in one Spark job, so example counts are small and
shrinking is off (:data:`NO_SHRINK`): a failure names every failing workload by its own
parameters instead, ready to pin as an explicit case.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from cdclake import formats
from cdclake.formats.base import DecodeOptions
from cdclake.formats.encoding import Encoded, Encoder
from cdclake.model import qualified_name
from cdclake.normalize import pair_update_halves
from cdclake.simulate import SimResult, Workload, workload
from tests.oracle import read_lake_history, read_lake_table, replay, same_history, same_rows

#: fields compared between carried and decoded events
COMPARED = (
    "kind", "op", "database", "schema", "table", "before", "after", "present", "primary_key",
    "columns", "tx_id", "tx_seq", "tx_last", "tx_size", "ddl", "event_time_ms",
)

SUFFIX = {"lines": ".jsonl", "avro": ".avro", "parquet": ".parquet"}

#: workloads per decode round-trip property example, all decoded in one Spark job
DECODE_EXAMPLES = 8
SEEDS = st.integers(0, 2**32 - 1)
#: no shrinking: an example is a batch of workloads costing a Spark job; failures name each
#: failing workload instead
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)
_SETTINGS = dict(phases=NO_SHRINK, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def scaled(n: int) -> int:
    """``n`` hypothesis examples under the ``ci`` profile (``max_examples`` 1), proportionally
    more under ``thorough``."""
    return n * settings.default.max_examples


def batched(examples: int = 1, **strategies) -> Callable:
    """Decorator: a hypothesis property whose every example is a batch of workloads:
    ``scaled(examples)`` examples, no shrinking."""

    def wrap(test):
        return settings(max_examples=scaled(examples), **_SETTINGS)(given(**strategies)(test))

    return wrap


def decode_property(test):
    """Decorator: run ``test(..., seeds)`` as a hypothesis property over lists of
    :data:`DECODE_EXAMPLES` distinct workload seeds (one Spark decode for all of them)."""
    return batched(seeds=st.lists(SEEDS, min_size=DECODE_EXAMPLES, max_size=DECODE_EXAMPLES, unique=True))(test)


def check_each(labels: list, check: Callable[[int], None]) -> None:
    """Run ``check(i)`` for every example ``i``; fail once at the end naming every example
    that failed (``labels[i]``) with the start of its error."""
    failed = []
    for i, label in enumerate(labels):
        try:
            check(i)
        except AssertionError as e:
            text = "\n  ".join(str(e).splitlines()[:6]) or "assertion failed"
            failed.append(f"{label}: {text}"[:3000])
    assert not failed, f"{len(failed)} of {len(labels)} examples failed:\n" + "\n".join(failed)


# ---- names: examples that share a Spark job or a target must not meet -----------------------


def tag_event(e: dict, k: int) -> dict:
    """``e`` with its database and schema names and its transaction id suffixed ``_x<k>``
    (examples are separate sources: the transaction gate must not take two examples'
    ``sim-3`` for one transaction); heartbeats and transaction markers name no table and keep
    their database."""
    sfx = lambda n: None if n is None else f"{n}_x{k}"  # noqa: E731
    if e.get("tx_id") is not None:
        e = {**e, "tx_id": sfx(e["tx_id"])}
    if not e.get("table"):
        return e
    return {**e, "database": sfx(e.get("database")), "schema": sfx(e.get("schema"))}


def tag(events: list[dict], k: int) -> list[dict]:
    return [tag_event(e, k) for e in events]


def keys_of(events: list[dict], encoder: Encoder | None = None) -> dict[str, list[str]]:
    """``--primary-key`` configuration from events' own keys (keyless tables left out), by the
    qualified names the decoder gives: with ``encoder``, the names of the carried events
    (SharePlex and TUPLE split ``db.schema.table`` at the first dot, Debezium's MySQL source
    block has no schema)."""
    out = {}
    for e in events:
        c = encoder.carried(e) if encoder is not None else e
        if c is not None and c.get("table") and e.get("primary_key"):
            out[qualified_name(c["database"], c["schema"], c["table"])] = list(e["primary_key"])
    return out


# ---- decode round trips ----------------------------------------------------------------------


def decode_paths(spark, fmt: str, paths: list[Path], **options) -> tuple[list[dict], list]:
    """Decode files of ``fmt``: (events after update-half pairing, sorted by position then
    input line; reject rows)."""
    paths = [Path(p) for p in paths]
    by_file = decode_files(spark, fmt, paths, **options)
    return [e for p in paths for e in by_file[p][0]], [r for p in paths for r in by_file[p][1]]


def decode_files(spark, fmt: str, paths: list[Path], **options) -> dict[Path, tuple[list[dict], list]]:
    """Decode files of ``fmt`` in one Spark job: per path (its events after update-half pairing
    within the file, sorted by position then input line; its reject rows). File names must be
    distinct."""
    paths = [Path(p) for p in paths]
    names = {p.name: p for p in paths}
    assert len(names) == len(paths), "decode_files needs distinct file names"
    decoder = formats.get(fmt)
    raw = decoder.read_files(spark, [str(p) for p in paths])
    decoded = decoder.decode(raw, DecodeOptions(**options)).cache()
    try:
        rejects = decoded.where(F.col("error_code").isNotNull()).collect()
        events = decoded.where(F.col("error_code").isNull()).select(F.explode("events").alias("e")).select("e.*")
        # update halves pair within their file only (files of one call may hold the same tables
        # and positions): the file rides in ``format`` while pairing
        sep = "\u0001"
        tagged = events.withColumn("format", F.concat_ws(sep, "format", F.col("source_record.file")))
        rows = pair_update_halves(tagged).withColumn("format", F.substring_index("format", sep, 1)).collect()
    finally:
        decoded.unpersist()
    out: dict[Path, tuple[list[dict], list]] = {p: ([], []) for p in names.values()}

    def owner(file: str | None) -> Path:
        return names[(file or "").rsplit("/", 1)[-1]]

    for r in rows:
        e = r.asDict(recursive=True)
        out[owner((e["source_record"] or {}).get("file"))][0].append(e)
    for r in rejects:
        out[owner((r["source_record"] or {})["file"])][1].append(r)
    for evs, _ in out.values():
        evs.sort(key=lambda e: ([int(x) for x in (e["position"] or {}).get("order") or []], (e["source_record"] or {}).get("line") or 0))
    return out


def comparable(event: dict) -> dict:
    """The fields :data:`COMPARED` of an event; ``columns`` as a list of plain dicts."""
    out = {k: event.get(k) for k in COMPARED}
    if out["columns"] is not None:
        out["columns"] = [dict(c) for c in out["columns"]]
    return out


def floats_as_numbers(event: dict) -> dict:
    """``event`` (a :func:`comparable` dict) with the image values of float and double columns
    as Python floats: a double has more than one canonical text ('83300.00' written by one
    format, '83300.0' read back by another; the JVM 17's ``Double.toString`` is not always the
    shortest), so conversions between formats compare them as numbers."""
    floats = {c["name"] for c in event["columns"] or [] if c.get("spark_type") in ("float", "double")}
    if not floats:
        return event
    num = lambda img: img and {k: (float(v) if k in floats and v is not None else v) for k, v in img.items()}  # noqa: E731
    return {**event, "before": num(event["before"]), "after": num(event["after"])}


def decode_round_trip(spark, fmt: str, events: list[dict], tmp_path: Path, **options) -> tuple[list[dict], list[dict]]:
    """``(decoded, carried)`` for ``events`` (commit order): both lists of :func:`comparable`
    dicts in order. Fails if the decoder rejects any encoded record."""
    enc = formats.get_encoder(fmt)
    encoded = enc.encode(events)
    path = enc.write(encoded, tmp_path / f"all{SUFFIX[enc.file_kind]}")
    decoded, rejects = decode_paths(spark, fmt, [path], **options)
    assert not rejects, f"{fmt}: the decoder rejected encoded records: {[(r.error_code, r.error_message) for r in rejects[:3]]}"
    carried = [c for c in (enc.carried(e) for e in events) if c is not None]
    return [comparable(e) for e in decoded], [comparable(e) for e in carried]


@dataclass
class RoundTrip:
    """One example of :func:`decode_round_trips`: its (tagged) events, the encoder that wrote
    them, what it decoded to and what the encoder says it carries (both :func:`comparable`)."""

    events: list[dict]
    encoder: Encoder
    decoded: list[dict]
    carried: list[dict]


def decode_round_trips(
    spark, fmt: str, examples: list[list[dict]], folder: Path, *, encoders: list[Encoder] | None = None,
    keys: bool = False, **options,
) -> list[RoundTrip]:
    """:func:`decode_round_trip` of several examples (lists of events in commit order) at once:
    each example is tagged (:func:`tag`), encoded by its own encoder (``encoders``, default the
    format's registered one) into its own file, and all files are decoded in one Spark job.
    ``keys``: decode with every example's keys configured (:func:`keys_of`), for formats
    without keys on the wire. Fails if the decoder rejects any encoded record."""
    encoders = encoders or [formats.get_encoder(fmt) for _ in examples]
    tagged = [tag(evs, k) for k, evs in enumerate(examples)]
    paths = [
        enc.write(enc.encode(evs), folder / f"example{k:03d}{SUFFIX[enc.file_kind]}")
        for k, (enc, evs) in enumerate(zip(encoders, tagged))
    ]
    if keys:
        options["primary_keys"] = {n: c for evs in tagged for n, c in keys_of(evs).items()}
    by_file = decode_files(spark, fmt, paths, **options)
    out = []
    for p, enc, evs in zip(paths, encoders, tagged):
        decoded, rejects = by_file[p]
        assert not rejects, f"{fmt}: the decoder rejected encoded records: {[(r.error_code, r.error_message) for r in rejects[:3]]}"
        carried = [c for c in (enc.carried(e) for e in evs) if c is not None]
        out.append(RoundTrip(evs, enc, [comparable(e) for e in decoded], [comparable(c) for c in carried]))
    return out


def check_round_trips(labels: list, trips: list[RoundTrip], check: Callable[[RoundTrip], None] | None = None) -> None:
    """``check`` (default: decoded == carried) for every round trip; one failure naming every
    example that failed (:func:`check_each`)."""

    def equal(t: RoundTrip) -> None:
        assert t.decoded == t.carried, _first_difference(t.decoded, t.carried)

    check_each(labels, lambda i: (check or equal)(trips[i]))


def _first_difference(got: list[dict], want: list[dict]) -> str:
    if len(got) != len(want):
        return f"{len(got)} events decoded, {len(want)} carried"
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            fields = sorted(k for k in set(g) | set(w) if g.get(k) != w.get(k))
            return f"event #{i} ({w.get('kind')} {w.get('op')} {w.get('table')}): " + "; ".join(
                f"{k}: {g.get(k)!r} != {w.get(k)!r}" for k in fields
            )
    return "equal"


# ---- scrambling --------------------------------------------------------------------------------


def subset(encoder: Encoder, encoded: Encoded, indexes: list[int]) -> Encoded:
    """The records at ``indexes`` (in that order) as an :class:`Encoded` of their own."""
    return Encoded(records=[encoded.records[i] for i in indexes])


def scramble_units(starts: list[int], rnd: random.Random, batches: int, duplicate: float) -> list[list[int]]:
    """Item indexes per batch, for items whose unit starts are ``starts`` (one per item: the
    index of the item that starts its unit): units shuffled, a ``duplicate`` fraction of them
    delivered twice, and cut into ``batches`` batches. Items of one unit stay together and in
    their order."""
    units: dict[int, list[int]] = {}
    for i, s in enumerate(starts):
        units.setdefault(s, []).append(i)
    order = list(units.values())
    order += [u for u in order if rnd.random() < duplicate]
    rnd.shuffle(order)
    cuts = sorted(rnd.sample(range(1, len(order)), min(batches - 1, max(len(order) - 1, 0)))) if len(order) > 1 else []
    out, prev = [], 0
    for c in [*cuts, len(order)]:
        out.append([i for u in order[prev:c] for i in u])
        prev = c
    return [b for b in out if b]


def scramble(encoded: Encoded, rnd: random.Random, batches: int, duplicate: float) -> list[list[int]]:
    """Record indexes per batch: units (see :attr:`Encoded.units`) shuffled, a ``duplicate``
    fraction of them delivered twice, and cut into ``batches`` batches. Records of one unit
    stay together and in their order."""
    return scramble_units(encoded.unit_starts(), rnd, batches, duplicate)


# ---- the oracle --------------------------------------------------------------------------------


def expected_tables(encoder: Encoder, events: list[dict]) -> tuple[dict, dict]:
    """The oracle: (rows, schemas) per table from replaying the carried events in commit order
    (as the format's: its snapshot rows rank as the decoder's do)."""
    carried = [dict(c, format=encoder.name) for c in (encoder.carried(e) for e in events) if c is not None]
    return replay(carried, strict=False)


def assert_lake_matches(spark, target: Path, rows: dict, schemas: dict, history: bool = False) -> None:
    """Every table of ``rows`` (name -> expected rows; with ``history``, expected versions as
    ``tests.oracle.replay`` gives them, read from SCD type 2 tables) holds them, with
    ``schemas``' columns."""
    from delta.tables import DeltaTable

    read, same = (read_lake_history, same_history) if history else (read_lake_table, same_rows)
    for name, expected in rows.items():
        path = f"{target}/{name}"
        if not DeltaTable.isDeltaTable(spark, path):
            assert expected == [], f"{name}: no Delta table but {len(expected)} rows expected"
            continue
        schema, got = read(spark, path)
        assert schema == schemas[name], f"{name}: table schema {schema} != {schemas[name]}"
        same(got, expected, schema)


# ---- what each format's scrambled workloads may hold ---------------------------------------


def value_typed(col: dict) -> bool:
    """dts-avro: columns whose DTS column type depends on the value (DECIMAL: precision and
    scale; BLOB-coded TEXT and VARCHAR-coded VARBINARY: text or bytes by the charset): a record
    in which such a column is NULL states no type (``spark_type`` null), and a new column no
    event types gets its code's default, not the declared type. (A VARCHAR column's default,
    ``string``, is its type: not filtered.)"""
    t, src = (col["spark_type"] or "").lower(), (col["source_type"] or "").lower()
    return t.startswith("decimal") or t == "binary" or (t == "string" and "text" in src)


def typed_when_null(events: list[dict]) -> list[dict]:
    """``events`` without the columns whose type DTS loses on a NULL value (:func:`value_typed`).

    A narrow restriction for the dts-avro scrambled ingests only. The applier types such a
    column from the batch's other events, else keeps the table's type, and gives a column
    that no event of its first batch types its code's default (decimal(38,10) for DECIMAL); the
    shared oracle
    (tests/oracle.replay) reads events one by one and does not know the batches, so it cannot
    tell which of a table's first values leave the column untyped. Since session 15 the two
    agree wherever a table's first event types the column
    (test_a_null_decimal_keeps_the_column_type in tests/formats/dts_avro/test_roundtrip.py).
    The columns are removed from every event (images, columns, keys are never among them),
    which keeps the stream consistent."""
    out = []
    for e in events:
        drop = {c["name"] for c in e["columns"] or [] if value_typed(c)}
        keep = lambda img: None if img is None else {k: v for k, v in img.items() if k not in drop}  # noqa: E731
        out.append({
            **e,
            "columns": None if e["columns"] is None else [c for c in e["columns"] if c["name"] not in drop],
            "before": keep(e["before"]), "after": keep(e["after"]),
        })  # fmt: skip
    return out


#: every format with an encoder, in a fixed order
FORMATS = (
    "canal-json", "datahub-tuple", "dataworks-json", "debezium-json", "dts-avro", "qlik-json", "shareplex-json",
)
#: formats whose records carry no key: their ingests configure the workload's keys (--primary-key)
KEYS_CONFIGURED = ("datahub-tuple", "debezium-json", "shareplex-json")
#: at most this many batches per scrambled workload of a format, for an applier gap that needs
#: a one-batch cut (none today: qlik-json's went with per-column positions, see format_workload)
MAX_BATCHES: dict[str, int] = {}
#: events per scrambled workload (a Delta commit per table per batch makes them costly)
SCRAMBLED_EVENTS = 80
#: formats whose DDL events carry the statement's text (Canal ``sql``, DataWorks ``ddl.text``,
#: DTS Avro ``DDL`` records, Debezium's schema change ``ddl``): the applier reads a table rename
#: from it (cdclake.apply.renames). Qlik's metadata messages, SharePlex and TUPLE carry none.
RENAMES_CARRIED = ("canal-json", "dataworks-json", "debezium-json", "dts-avro")


def format_workload(fmt: str, seed: int, events: int = SCRAMBLED_EVENTS, renames: bool = False, rename_keyless: bool = True) -> list[dict]:
    """The simulator workload (events in commit order) a scrambled ingest of ``fmt`` runs, with
    the restrictions the format needs today (applier bugs: strict xfail tests pin them and
    NOTES.md lists them; oracle limits). ``renames``: the formats of :data:`RENAMES_CARRIED`
    rename tables too (``Workload(rename_tables=True)``; the oracle follows them, in histories
    too); off, the same seed gives the stream it gave before the
    option existed. ``rename_keyless`` False: only keyed tables are renamed.

    * canal-json, dataworks-json, debezium-json: none (Debezium's Kafka keys do not survive
      the files the harness writes: its keys are configured, :data:`KEYS_CONFIGURED`).
    * dts-avro: without the columns whose type DTS loses on a NULL value (:func:`typed_when_null`).
    * qlik-json: ``truncates=False``: Qlik writes no message for a TRUNCATE (the encoder drops
      it), and a stream without its truncates is not one a database can produce: a key
      inserted again after the truncate collides with the row the truncate removed, which the
      oracle rightly refuses. The decoder ties a DT to its MD within one batch only: the
      format's units keep each MD with the DTs of its table and version. (Until session 24
      one batch, :data:`MAX_BATCHES`: a row's insert and its later partial update (a Qlik
      UPDATE carries only the changed columns) travel in different units once a DDL starts a
      new table version, and a partial update applied in a batch before its row's older insert
      lost the columns it does not carry; seed 25 cut into 3 batches showed it. Per-column
      positions, ``delta_table.COLUMN_ORDERS``, fixed it.)
    * datahub-tuple: a TUPLE record carries no types, so a NULL value (JSON null) has none: the
      decoder leaves its spark_type null and the applier takes the column's type from other
      rows. The oracle takes an event's column list as the table's schema and cannot type a
      value under a null type (decode_value(text, None) raises, e.g. seed=0, shuffle_seed=0,
      batches=1, duplicate=0.0). So no NULL values (simulator NULL_RATE = 0) and no DDL (ADD
      COLUMN leaves NULLs in existing rows; TUPLE topics have a fixed schema anyway, seed 000).
      The decode round trips keep NULLs.
    * shareplex-json: none. (Until session 15 one batch: seeds 1 and 2 cut into 3 batches ended
      with extra keyless audit_log rows, an update written before an ADD COLUMN whose before
      image lacks the new column not moving its row; NOTES.md.) A partial update with a before
      image is applied as a full one when that image holds every column, and always on a table
      without a key (test_keyless_partial_update_replaces_the_row,
      test_partial_update_before_its_row_in_an_earlier_batch), and counts as a delete of the row
      it moves (test_keyless_update_before_its_insert_in_an_earlier_batch).
    """
    if fmt == "dts-avro":
        return typed_when_null(Workload(seed, events=events, rename_tables=renames, rename_keyless=rename_keyless).generate().events)
    if fmt == "qlik-json":
        return Workload(seed, events=events, truncates=False).generate().events
    if fmt == "datahub-tuple":
        with mock.patch.object(workload, "NULL_RATE", 0):
            res = Workload(seed, events=events, ddl=False).generate()
        assert all(v is not None for e in res.events for img in (e["before"], e["after"]) for v in (img or {}).values())
        return res.events
    if fmt == "shareplex-json":
        return Workload(seed, events=events).generate().events
    assert fmt in FORMATS, fmt
    return Workload(seed, events=events, rename_tables=renames and fmt in RENAMES_CARRIED, rename_keyless=rename_keyless).generate().events


def simulated_workload(
    seed: int, events: int = SCRAMBLED_EVENTS, rename_tables: bool = False, identical_rows: bool = False, drop_rename: bool = False,
    rename_keyless: bool = True, recreate_renamed: bool = False,
) -> SimResult:
    """The format-free workload of the applier property: every table template (keyless
    included), truncates with columns, ADD/widen DDL, table drops (each followed by the table's
    CREATE again); with ``drop_rename``, DROP and RENAME COLUMN (the applier reads an event
    with the columns in force at its position in any arrival order since session 25; off, the
    same seed gives the stream it gave before); with ``rename_tables``, table renames (``RENAME
    TABLE a TO b``, at most one per table; ``rename_keyless`` False: keyed tables only; ``recreate_renamed``:
    a table created again under the old name right after, Workload's option); with ``identical_rows``, copies of the keyless table's rows (the
    oracle's tables are multisets, its histories end the copy that began first)."""
    return Workload(seed, events=events, drop_tables=True, drop_rename=drop_rename, rename_tables=rename_tables,
                    identical_rows=identical_rows, rename_keyless=rename_keyless, recreate_renamed=recreate_renamed).generate()


# ---- scrambled ingests through the real pipeline -------------------------------------------


@dataclass(frozen=True)
class Case:
    """One scrambled workload: simulator seed, shuffle seed, batches, fraction delivered twice."""

    seed: int
    shuffle_seed: int
    batches: int
    duplicate: float


#: the one scrambled ingest each format runs (tests/formats/<fmt>/test_roundtrip.py), chosen
#: so that it cuts into the most batches the format allows and delivers units twice (the
#: parameters are checked by tests/test_harness.py, pure Python)
INGEST_CASES = {
    "canal-json": Case(seed=11, shuffle_seed=15, batches=3, duplicate=0.3),
    "datahub-tuple": Case(seed=12, shuffle_seed=13, batches=3, duplicate=0.3),
    "dataworks-json": Case(seed=13, shuffle_seed=13, batches=3, duplicate=0.3),
    "debezium-json": Case(seed=14, shuffle_seed=17, batches=3, duplicate=0.3),
    "dts-avro": Case(seed=15, shuffle_seed=16, batches=3, duplicate=0.3),
    # 9 units (a table's DTs between two MDs travel together; seeds without DDL have only 3)
    # (batches=3 failed here until session 24: a partial update applied before its row's older
    # insert; per-column positions, delta_table.COLUMN_ORDERS, fixed it)
    "qlik-json": Case(seed=25, shuffle_seed=26, batches=3, duplicate=0.3),
    # seed 1: the 3-batch cut that ended with extra keyless rows until session 15 (an update
    # written before an ADD COLUMN); seed 0, on which the ingest property found SharePlex's
    # other bugs, is the property's first example (tests/apply/test_properties.py)
    "shareplex-json": Case(seed=1, shuffle_seed=8, batches=3, duplicate=0.3),
}


#: formats whose fixed scrambled ingest ends with a replay of every batch file in one more ingest:
#: those whose decoder keeps context across batches (``keeps_context``: Qlik's table metadata),
#: where a re-delivered file meets context its first delivery left. For the others a file's
#: decode does not depend on earlier batches, and re-delivery through the pipeline is already in
#: the scramble (a ``duplicate`` fraction of the units delivered twice, anywhere, across the
#: batches), while the applier property re-applies every shape's whole workload at its end
#: (tests/apply/test_properties.py). The replay pass cost ~13 s a format (a MERGE of every
#: table); dropped for six formats in session 21 to keep ``.ci/run`` in its time budget.
REPLAYED_AT_THE_END = frozenset(d.name for d in formats.all_decoders() if d.keeps_context)


def ingest_case(spark, fmt: str, case: Case, tmp_path: Path) -> list:
    """The scrambled ingest of ``case`` for ``fmt`` (:func:`format_workload`, keys configured for
    :data:`KEYS_CONFIGURED` formats), then, for :data:`REPLAYED_AT_THE_END` formats, the replay
    of every batch file in one ingest. Returns the first pass's ``IngestSummary`` per batch."""
    assert case.batches <= MAX_BATCHES.get(fmt, 3), f"{fmt}: {case.batches} batches (applier bug, see format_workload)"
    events = format_workload(fmt, case.seed)
    keys = keys_of(events, formats.get_encoder(fmt)) if fmt in KEYS_CONFIGURED else {}
    return ingest_scrambled(
        spark, fmt, events, tmp_path, case.shuffle_seed, batches=case.batches, duplicate=case.duplicate, primary_keys=keys,
        replay_all=fmt in REPLAYED_AT_THE_END, replay="together",
    )


def ingest_scrambled(
    spark, fmt: str, events: list[dict], tmp_path: Path, seed: int, *, batches: int = 2, duplicate: float = 0.2,
    replay_all: bool = True, replay: str = "files", parts: list[list[int]] | None = None, **options,
) -> list:
    """Encode ``events``, scramble them (seeded), ingest batch by batch with the pipeline, and
    assert the Delta tables equal the oracle; with ``replay_all``, ingest every batch again
    (``replay``: ``"files"`` one file per ingest as before, ``"together"`` all the files in one
    ingest) and assert nothing changed. ``parts`` (record indexes of the encoding, one list per
    batch) replaces the scramble. Returns the first pass's ``IngestSummary`` per batch."""
    from cdclake.pipeline import IngestConfig, ingest

    enc = formats.get_encoder(fmt)
    encoded = enc.encode(events)
    if parts is None:
        parts = scramble(encoded, random.Random(seed), batches, duplicate)
    files = [enc.write(subset(enc, encoded, idx), tmp_path / "in" / f"batch{k:03d}{SUFFIX[enc.file_kind]}") for k, idx in enumerate(parts)]
    target = tmp_path / "lake"
    cfg = dict(primary_keys=options.pop("primary_keys", {}), extra=options.pop("extra", {}))
    summaries = []
    for f in files:
        s = ingest(spark, IngestConfig(format=fmt, inputs=[str(f)], target=str(target), **cfg))
        assert s.rejected == 0, f"{fmt}: rejects while ingesting {f.name}: {s.reject_codes}"
        summaries.append(s)
    rows, schemas = expected_tables(enc, events)
    assert_lake_matches(spark, target, rows, schemas)
    if replay_all:
        for inputs in [[str(f)] for f in files] if replay == "files" else [[str(f) for f in files]]:
            s = ingest(spark, IngestConfig(format=fmt, inputs=inputs, target=str(target), **cfg))
            assert s.rejected == 0, f"{fmt}: rejects while replaying {inputs}: {s.reject_codes}"
        assert_lake_matches(spark, target, rows, schemas)
    return summaries
