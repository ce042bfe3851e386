"""Column types of ``dataworks-json`` records: the DataWorks column type (``dataColumn[].type``)
-> Spark type, the SQL that turns a value into canonical text per type, and what one signature
(a record's column list and its images' keys) fixes on the driver.

Sources: as the decoder's (seed ``002_f06f21975cd4d102.txt``, field types; ``shared/FORMATS.md``).
"""

from __future__ import annotations

from cdclake.formats.typed import TS_FORMAT, Sig, columns_literal
from cdclake.sqltext import sql_str

ROW_ID_COLUMN = "#alibaba_rds_row_id#"  # MySQL tables without a primary key (LONG)
ORACLE_ROW_ID_COLUMN = "rowid"  # Oracle sources (STRING)

#: latest ms-since-epoch accepted for DATE values (9999-12-31 23:59:59.999 UTC)
_MAX_MS = 253402300799999
#: what a DOUBLE value may look like (the text is kept as written, trimmed)
_FLOAT_RE = r"^\\s*([+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?|NaN|[+-]?Infinity)\\s*$"

#: DataWorks column type (upper case, trimmed) -> Spark type; any other type -> string
SPARK_TYPES = {"BOOLEAN": "boolean", "DOUBLE": "double", "LONG": "bigint", "DATE": "timestamp", "BYTES": "binary", "STRING": "string"}

#: per Spark type: SQL turning a raw value (``{0}``, the JSON value's text) into canonical text,
#: NULL when it does not read as the type (BAD_VALUE)
CONVERT = {
    "string": "{0}",
    "bigint": "(case when trim({0}) rlike '^[+-]?[0-9]+$' then cast(try_cast(trim({0}) as bigint) as string) end)",
    "double": f"(case when {{0}} rlike '{_FLOAT_RE}' then trim({{0}}) end)",
    "boolean": "(case lower(trim({0})) when 'true' then 'true' when '1' then 'true' when 'false' then 'false' when '0' then 'false' end)",
    # DATE: integral milliseconds since the epoch (UTC), else timestamp text as Spark reads it;
    # MySQL's zero dates read as NULL
    "timestamp": (
        f"(case when trim({{0}}) rlike '^-?[0-9]{{{{1,15}}}}$' and abs(cast(trim({{0}}) as bigint)) <= {_MAX_MS} "
        f"then date_format(timestamp_millis(cast(trim({{0}}) as bigint)), '{TS_FORMAT}') "
        "when {0} like '0000-00-00%' then null "
        f"else date_format(coalesce(try_to_timestamp({{0}}), try_cast({{0}} as timestamp)), '{TS_FORMAT}') end)"
    ),
    # BYTES: base64, already canonical (whitespace dropped)
    "binary": "(case when try_to_binary(regexp_replace({0}, '\\\\s', ''), 'base64') is not null then regexp_replace({0}, '\\\\s', '') end)",
}
#: per Spark type: SQL true when a raw value is a source's "no value" (NULL, not BAD_VALUE)
VOID = {"timestamp": "{0} like '0000-00-00%'"}


def spark_type(type_text: str | None) -> str:
    """The Spark type for a DataWorks column type (``dataColumn[].type``, case-insensitive):
    BOOLEAN -> boolean, DOUBLE -> double, LONG -> bigint, STRING -> string, DATE (ms since
    epoch) -> timestamp, BYTES (base64) -> binary; anything else (or none) -> string."""
    return SPARK_TYPES.get((type_text or "").strip(" ").upper(), "string")


class Signature:
    """What one signature fixes (on the driver): the after and before images' :class:`Sig`
    (one id, each image its own key order), the events' ``columns`` and the key fallback."""

    def __init__(self, sig_id: int, listed: list | None, after_keys: list | None, before_keys: list | None):
        """``listed``: the record's ``schema.dataColumn`` as parsed (rows of ``name``, ``type``;
        None: the message has no column list); ``after_keys``/``before_keys``: its images' column
        names in map order."""
        listed = None if listed is None else [None if c is None else {"name": c["name"], "type": c["type"]} for c in listed]
        cols = [c for c in listed or [] if c is not None and c.get("name") is not None]
        types: dict[str, str] = {}
        for c in cols:  # first declaration of a name wins
            types.setdefault(c["name"], spark_type(c.get("type")))
        declared = None
        if listed is not None:
            declared = [
                dict(name=c["name"], source_type=c.get("type"), spark_type=spark_type(c.get("type")), precision=None, scale=None, nullable=None)
                for c in cols
            ]

        def image(keys) -> Sig:
            keys = list(keys or [])
            ts = [types.get(k, "string") for k in keys]
            return Sig(sig_id, tuple(keys), tuple(CONVERT.get(t, "{0}") for t in ts), None, tuple(VOID.get(t) for t in ts))

        self.after, self.before = image(after_keys), image(before_keys)
        self.columns = columns_literal(declared)
        # the key when the message has none: the columns of its column list, else its image's
        names = [c["name"] for c in cols] if listed is not None else list(after_keys if after_keys is not None else before_keys or [])
        if ROW_ID_COLUMN in names:
            self.fallback_key = f"array({sql_str(ROW_ID_COLUMN)})"
        elif ORACLE_ROW_ID_COLUMN in names:
            self.fallback_key = f"(case when is_oracle then array({sql_str(ORACLE_ROW_ID_COLUMN)}) end)"
        else:
            self.fallback_key = "cast(null as array<string>)"
