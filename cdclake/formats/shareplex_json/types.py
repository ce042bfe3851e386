"""The layout of a ``shareplex-json`` update, fixed by its signature (its configured key and the
columns of its ``key`` and ``data`` maps) and worked out on the driver once per signature: how
its after image and ``present`` columns are built, and whether it changes its key.

Sources: as the decoder's (seed ``001_a1c6319148bc2083.txt``, ``shared/FORMATS.md`` ``shareplex-json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdclake.sqltext import sql_str

_EMPTY = "cast(map() as map<string,string>)"


@dataclass(frozen=True)
class UpdateSig:
    """An update's layout, fixed by its signature (worked out on the driver): the configured key
    ``pk`` (None: none), the columns of ``key`` (``kk``) and of ``data`` (``dk``) in wire order
    (None: the image is absent). Values are read by position from ``kv = map_values(j.key)`` and
    ``dv = map_values(j.data)``."""

    id: int
    pk: tuple[str, ...] | None
    kk: tuple[str, ...] | None
    dk: tuple[str, ...] | None

    @staticmethod
    def of(sig_id: int, pk, kk, dk) -> "UpdateSig":
        """The layout of signature ``sig_id`` from its parts (lists or None)."""
        return UpdateSig(sig_id, None if pk is None else tuple(pk), None if kk is None else tuple(kk), None if dk is None else tuple(dk))

    def _after(self, key_change: bool) -> list[tuple[str, str]]:
        """The after image's (column, value SQL) in order: the key's identifying columns (every
        column of ``key`` on a key change or without a configured key) not in ``data``, then
        ``data``."""
        kk, dk = self.kk or (), self.dk or ()
        keep = [
            (c, f"kv[{i}]") for i, c in enumerate(kk)
            if (key_change or self.pk is None or c in self.pk) and c not in dk
        ]
        return keep + [(c, f"dv[{j}]") for j, c in enumerate(dk)]

    def key_change_sql(self) -> str:
        """SQL: ``data`` changes a configured key column (null-safe inequality)."""
        if self.pk is None:
            return "false"
        kk, dk = self.kk or (), self.dk or ()
        tests = [f"not (dv[{dk.index(c)}] <=> kv[{kk.index(c)}])" for c in self.pk if c in dk and c in kk]
        return "(" + " or ".join(tests) + ")" if tests else "false"

    @staticmethod
    def _map(entries: list[tuple[str, str]]) -> str:
        if not entries:
            return _EMPTY
        return f"map_from_arrays(array({', '.join(sql_str(c) for c, _ in entries)}), array({', '.join(v for _, v in entries)}))"

    @staticmethod
    def _names(entries: list[tuple[str, str]]) -> str:
        if not entries:
            return "cast(array() as array<string>)"
        return f"array({', '.join(sql_str(c) for c, _ in entries)})"

    def after_sql(self) -> str:
        """SQL: the update's after image (``map<string,string>``; ``key_change``: the column of
        :meth:`key_change_sql`)."""
        changed, same = self._after(True), self._after(False)
        if changed == same:
            return self._map(same)
        return f"(case when key_change then {self._map(changed)} else {self._map(same)} end)"

    def present_sql(self) -> str:
        """SQL: the columns the after image carries (``array<string>``), as :meth:`after_sql`."""
        changed, same = self._after(True), self._after(False)
        if changed == same:
            return self._names(same)
        return f"(case when key_change then {self._names(changed)} else {self._names(same)} end)"

    @property
    def missing(self) -> bool:
        """The update lacks an image it needs: no ``data``, no ``key`` without a configured key,
        or a configured key column in neither."""
        if not self.dk:
            return True
        if self.pk is None:
            return not self.kk
        return not all(c in (self.kk or ()) or c in self.dk for c in self.pk)
