"""``dts-avro``: Alibaba Cloud DTS "DTS Avro" records (one Avro binary datum of
``com.alibaba.dts.formats.avro.Record`` per Kafka value), and Avro container files of them."""

from cdclake.formats.dts_avro.decoder import DtsAvroDecoder
from cdclake.formats.dts_avro.encoder import DtsAvroEncoder
from cdclake.formats.dts_avro.files import read_avro_records
from cdclake.formats.dts_avro.schema import RECORD_SCHEMA, RECORD_SCHEMA_JSON

__all__ = ["DtsAvroDecoder", "DtsAvroEncoder", "read_avro_records", "RECORD_SCHEMA", "RECORD_SCHEMA_JSON"]
