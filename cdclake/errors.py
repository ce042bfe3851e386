"""One error class, stable error codes.

Two kinds of failure exist in cdclake and they never mix:

* a *record* that cannot be decoded is not an exception: it becomes a row of the rejects table
  (``T/_cdclake/rejects``) carrying one of the :class:`RejectCode` values below, and the run goes
  on;
* a *usage or environment* problem (unknown format, missing input, unwritable target, jars not
  fetched) raises :class:`CdclakeError`, which the command prints as one line and turns into a
  non-zero exit code.

Codes are stable: tests and users match on the code, never on the wording of the message.
"""

from __future__ import annotations

from enum import Enum


class RejectCode(str, Enum):
    """Why a record went to the rejects table (column ``error_code``)."""

    MALFORMED_JSON = "MALFORMED_JSON"
    """The value is not a JSON document (truncated, not UTF-8 text, not JSON at all)."""
    NOT_AN_OBJECT = "NOT_AN_OBJECT"
    """The value is JSON but not a JSON object (an array, a string, a number)."""
    SCHEMA_MISMATCH = "SCHEMA_MISMATCH"
    """A JSON object that lacks a field the format requires, or has one of the wrong JSON type."""
    UNKNOWN_OP = "UNKNOWN_OP"
    """The operation / type field holds a value the format does not define."""
    MISSING_TABLE = "MISSING_TABLE"
    """A data or DDL message that does not say which table it belongs to."""
    MISSING_IMAGE = "MISSING_IMAGE"
    """A data change without the row image its operation needs (an insert with no after image)."""
    BAD_VALUE = "BAD_VALUE"
    """A column value that cannot be read as the column's declared type."""
    BAD_POSITION = "BAD_POSITION"
    """The ordering coordinate (sequence id, LSN, SCN ...) is missing or not a number."""
    AVRO_DECODE_ERROR = "AVRO_DECODE_ERROR"
    """Bytes that are not a datum of the expected Avro schema."""
    UNPAIRED_UPDATE = "UNPAIRED_UPDATE"
    """One half of a two-record update (before/after) whose other half never arrived. Not
    raised today: the applier applies a lone half (a before half deletes its row, ordered before
    its own position's changes; an after half upserts), so an update whose halves arrive in two
    batches still ends as one update; the code stays so that a stored reject keeps its name."""
    RECORD_TOO_LARGE = "RECORD_TOO_LARGE"
    """A record value longer than the ingest's ``--max-record-bytes``."""
    TOO_MANY_COLUMNS = "TOO_MANY_COLUMNS"
    """An event of a table that has more columns in its batch than ``--max-columns``: the table's
    events of the batch are rejected (``raw_value``: the canonical event as JSON)."""
    TABLE_FAILED = "TABLE_FAILED"
    """An event of a table that could not be applied in its batch (the file system refused the
    table's folder, Delta refused a change): the message gives the reason, ``raw_value`` the
    canonical event as JSON. The batch's other tables were applied."""


class CdclakeError(Exception):
    """A usage or environment error: printed as one line by the CLI, exit code 2.

    ``code`` is stable (``UNKNOWN_FORMAT``, ``INPUT_NOT_FOUND``, ``TARGET_NOT_WRITABLE``,
    ``JARS_MISSING``, ``BAD_OPTION``, ``VERSION_MISMATCH``, ``FORMAT_NOT_DETECTED`` ...).
    """

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"
