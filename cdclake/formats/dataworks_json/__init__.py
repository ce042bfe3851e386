"""``dataworks-json`` (alias ``datahub-blob``): DataWorks "sync all to Kafka" JSON, and the same
JSON stored as UTF-8 bytes in DataHub BLOB topics."""

from cdclake.formats.dataworks_json.decoder import DataWorksJsonDecoder
from cdclake.formats.dataworks_json.encoder import DataWorksJsonEncoder

__all__ = ["DataWorksJsonDecoder", "DataWorksJsonEncoder"]
