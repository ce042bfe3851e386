"""``datahub-tuple``: DataHub TUPLE topic records written by DTS / Data Integration, as JSON lines
or Parquet files of records."""

from cdclake.formats.datahub_tuple.decoder import DatahubTupleDecoder
from cdclake.formats.datahub_tuple.encoder import DatahubTupleEncoder
from cdclake.formats.datahub_tuple.files import read_parquet_records, read_records

__all__ = ["DatahubTupleDecoder", "DatahubTupleEncoder", "read_parquet_records", "read_records"]
