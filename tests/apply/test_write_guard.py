"""One table's write as a batch runs it (cdclake.apply.batch._write), without Spark: whatever
ends the write, the deletes append and the progress display both hear of the table."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cdclake.apply import batch


class Deletes:
    """A deletes append (audit.DeletesAppend's ``add``) that records what it is told and fails
    on the table's last word when ``fail`` is set (a full disk, say)."""

    def __init__(self, fail: bool):
        self.fail, self.told = fail, []

    def add(self, name, rows):
        self.told.append((name, rows))
        if rows is None and self.fail:
            raise OSError("no space left on device")


def _refused(*args, **kwargs):
    raise OSError("permission denied")  # what the file system says of a table it refuses


@pytest.mark.parametrize("fail", [False, True])
def test_a_failed_table_is_counted_even_when_its_deletes_append_fails(monkeypatch, fail):
    monkeypatch.setattr(batch, "write_table", _refused)
    heard, deletes = [], Deletes(fail)
    prep = SimpleNamespace(plan=SimpleNamespace(name="db.t"), path="/nowhere/db.t")
    if fail:
        with pytest.raises(OSError, match="no space"):
            batch._write(None, None, prep, "/nowhere/_cdclake/deletes", deletes, lambda name, failed: heard.append((name, failed)))
    else:
        result = batch._write(None, None, prep, "/nowhere/_cdclake/deletes", deletes, lambda name, failed: heard.append((name, failed)))
        assert (result.table, result.reason) == ("db.t", "OSError: permission denied")
    assert deletes.told == [("db.t", None)]
    assert heard == [("db.t", True)]
