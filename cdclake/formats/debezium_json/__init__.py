"""``debezium-json``: Debezium change events (any connector), with or without the Kafka Connect
``schema``/``payload`` envelope; also the transaction-metadata and schema-change topics."""

from cdclake.formats.debezium_json.decoder import DebeziumJsonDecoder
from cdclake.formats.debezium_json.encoder import DebeziumJsonEncoder

__all__ = ["DebeziumJsonDecoder", "DebeziumJsonEncoder"]
