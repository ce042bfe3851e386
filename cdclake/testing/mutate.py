"""Mutations of wire records for fuzzing the decoders (issue 11): what a broken producer, a bad
copy or a hostile sender may put on a topic.

Pure Python, no Spark: :func:`mutate` turns one valid record value into a damaged one;
:func:`special_values` are fixed hostile values every decoder must survive. Used by
``tests/test_fuzz.py`` (bounded, in CI) and ``bench/fuzz.py`` (a longer run on demand, printing
rejects by code).

JSON values are damaged structurally (a field removed, a type swapped ...) and textually
(truncated, invalid UTF-8 ...); other values (Avro datums) byte-wise.
"""

from __future__ import annotations

import json
import random

#: structural mutations of a JSON document (applied to one place in its tree)
JSON_MUTATIONS = (
    "type_swap", "drop_field", "extra_field", "bad_base64", "huge_number", "deep_nesting", "nul_in_string",
    "duplicate_key", "long_string", "unicode_name",
)
#: textual / byte mutations of any value
BYTE_MUTATIONS = ("truncate", "invalid_utf8", "nul_byte", "bit_flip", "insert_bytes", "empty", "whitespace", "swap_halves")

_DEEP = 2_000  # deeper than Jackson's default nesting limit (1000)


def special_values(big_bytes: int = 10 * 1024 * 1024) -> list[bytes]:
    """Fixed hostile values: empty, white space, ``null``, a bare number beyond long, deep
    nesting, NUL bytes, invalid UTF-8, duplicate keys, and one value of ``big_bytes`` bytes."""
    big = b'{"data": [{"v": "' + b"x" * max(0, big_bytes - 20) + b'"}]}'
    return [
        b"", b"   ", b"\t\r", b"null", b"99999999999999999999999999999999999999999", b"[]", b'"text"',
        b"[" * _DEEP + b"]" * _DEEP, b'{"a":' * _DEEP + b"1" + b"}" * _DEEP,
        b"\x00\x00\x00", b'{"op": "c\x00"}', b"\xff\xfe\xfd{", b'{"op": "c", "op": "d"}', b"{" + b'"k": 1, ' * 10_000 + b'"k": 2}',
        big,
    ]


def mutate(value: bytes, rnd: random.Random) -> tuple[str, bytes]:
    """One random mutation of ``value``: ``(mutation name, damaged bytes)``. A JSON object gets a
    structural mutation two times in three, else a byte mutation."""
    doc = _json(value)
    if doc is not None and rnd.random() < 2 / 3:
        kind = rnd.choice(JSON_MUTATIONS)
        return kind, _mutate_json(doc, kind, rnd)
    kind = rnd.choice(BYTE_MUTATIONS)
    return kind, _mutate_bytes(value, kind, rnd)


def _json(value: bytes):
    try:
        doc = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


def _places(doc, path=()):
    """Every (path, value) in a JSON tree, the root first."""
    yield path, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _places(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _places(v, path + (i,))


def _set(doc, path, value):
    if not path:
        return value
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


def _other_type(v, rnd: random.Random):
    choices = ["s", 1, -1.5, True, None, [], {}, [1, "a"], {"x": 1}]
    return rnd.choice([c for c in choices if type(c) is not type(v)])


def _mutate_json(doc, kind: str, rnd: random.Random) -> bytes:
    places = list(_places(doc))
    path, node = rnd.choice(places[1:] or places)
    objects = [(p, v) for p, v in places if isinstance(v, dict)]
    if kind == "type_swap":
        doc = _set(doc, path, _other_type(node, rnd))
    elif kind == "drop_field" and objects:
        p, obj = rnd.choice(objects)
        if obj:
            obj.pop(rnd.choice(list(obj)))
    elif kind == "extra_field" and objects:
        p, obj = rnd.choice(objects)
        obj[rnd.choice(["extra", "op", "type", "__proto__", "", "a.b", "x" * 300])] = _other_type(None, rnd)
    elif kind == "bad_base64":
        strings = [p for p, v in places if isinstance(v, str)]
        if strings:
            doc = _set(doc, rnd.choice(strings), rnd.choice(["!!!not base64$$", "AAA", "====", "\u00e9\u00e9"]))
    elif kind == "huge_number":
        big = rnd.choice([10**40, -(10**40), 2**63, -(2**63) - 1, 1e308, "1e400", "123456789012345678901234567890.123456789"])
        if isinstance(big, str):  # a number JSON allows and Python cannot hold: splice it in as text
            return json.dumps(_set(doc, path, "__BIG__"), ensure_ascii=False).replace('"__BIG__"', big).encode("utf-8")
        doc = _set(doc, path, big)
    elif kind == "deep_nesting":
        return json.dumps(_set(doc, path, "__DEEP__")).replace('"__DEEP__"', "[" * _DEEP + "]" * _DEEP).encode("utf-8")
    elif kind == "nul_in_string":
        doc = _set(doc, path, "a\x00b")
    elif kind == "duplicate_key" and objects:
        text = json.dumps(doc, ensure_ascii=False)
        first = text.find("{")
        key = rnd.choice(["op", "type", "data", "payload", "before", "after", "database", "table"])
        return (text[: first + 1] + json.dumps(key) + ": " + json.dumps(_other_type(None, rnd)) + ", " + text[first + 1:]).encode("utf-8")
    elif kind == "long_string":
        doc = _set(doc, path, "y" * rnd.choice([1_000, 100_000, 1_000_000]))
    elif kind == "unicode_name" and objects:
        p, obj = rnd.choice(objects)
        if obj:
            k = rnd.choice(list(obj))
            obj[rnd.choice(["\u202e" + k, k + "\n", "`" + k, "\ud7ff", "\U0001f600"])] = obj.pop(k)
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _mutate_bytes(value: bytes, kind: str, rnd: random.Random) -> bytes:
    n = len(value)
    at = rnd.randrange(n + 1) if n else 0
    if kind == "truncate":
        return value[:at]
    if kind == "invalid_utf8":
        return value[:at] + rnd.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]) + value[at:]
    if kind == "nul_byte":
        return value[:at] + b"\x00" + value[at:]
    if kind == "bit_flip" and n:
        i = rnd.randrange(n)
        return value[:i] + bytes([value[i] ^ (1 << rnd.randrange(8))]) + value[i + 1:]
    if kind == "insert_bytes":
        return value[:at] + bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 16))) + value[at:]
    if kind == "empty":
        return b""
    if kind == "whitespace":
        return rnd.choice([b" ", b"\n", b"\t \t"])
    if kind == "swap_halves":
        return value[at:] + value[:at]
    return value
