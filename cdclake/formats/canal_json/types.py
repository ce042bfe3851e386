"""Column types of ``canal-json`` messages: a data message's ``mysqlType`` (MySQL type text with
precision, scale, ``unsigned``) and ``sqlType`` (``java.sql.Types`` codes), read once per
signature on the driver, and the :class:`cdclake.formats.typed.Sig` they fix.

Source: seed ``001_a1c6319148bc2083.txt`` (DTS Kafka data formats, Canal Json section) and
``shared/FORMATS.md``; real messages from Apache Flink's and Apache Paimon's tests.
"""

from __future__ import annotations

import json

from cdclake.formats.sqltypes import jdbc_spark_type, mysql_precision_scale, mysql_spark_type
from cdclake.formats.typed import Sig


class NotAnObject(ValueError):
    """``mysqlType`` or ``sqlType`` is not a JSON object."""


def entries(text: str) -> list[tuple[str, str | None]]:
    """(column, type text) pairs of a ``mysqlType``/``sqlType`` object's raw JSON text, in order;
    values that are not strings as their JSON text (``4`` for a ``java.sql.Types`` code).

    Raises:
        NotAnObject: the text is not a JSON object.
    """
    if not text or text == "null":
        return []
    pairs = json.loads(text, object_pairs_hook=lambda p: ("__object__", p))
    if not (isinstance(pairs, tuple) and pairs[0] == "__object__"):
        raise NotAnObject(text[:80])

    def plain(v):
        if isinstance(v, tuple) and v and v[0] == "__object__":
            return {k: plain(x) for k, x in v[1]}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    out = []
    for k, v in pairs[1]:
        v = plain(v)
        out.append((k, v if v is None or isinstance(v, str) else json.dumps(v, separators=(",", ":"))))
    return out


def signature(sig_id: int, mysql: list, sql: list, keys: list) -> Sig:
    """The :class:`Sig` of a data message: ``mysql``/``sql`` are its ``mysqlType``/``sqlType``
    entries as (column, text) pairs, ``keys`` its rows' columns in order.

    Column types: ``mysqlType`` first, ``sqlType`` (``java.sql.Types``) for the columns it
    lacks, ``string`` for image columns neither declares. The events' ``columns``: the columns
    only ``sqlType`` declares (in its order), then ``mysqlType``'s, as the messages list them.
    """
    mysql_types = {k: v for k, v in mysql}
    declared, types = [], {}
    for k, code in sql:
        if k not in mysql_types and k not in types:
            types[k] = jdbc_spark_type(code)
            declared.append(dict(name=k, source_type=code, spark_type=types[k], precision=None, scale=None, nullable=None))
    for k, text in mysql:
        if k in types:
            continue
        types[k] = mysql_spark_type(text)
        p, sc = mysql_precision_scale(text)
        declared.append(dict(name=k, source_type=text, spark_type=types[k], precision=p, scale=sc, nullable=None))
    return Sig.of(sig_id, [(k, types.get(k, "string")) for k in keys], "latin1", declared)
