"""``qlik-json``: Qlik Replicate / Qlik Talend Data Integration Kafka target, JSON messages
(metadata ``MD`` and data ``DT``, wrapped in the ``atMSG`` envelope or flat)."""

from cdclake.formats.qlik_json.decoder import QlikJsonDecoder
from cdclake.formats.qlik_json.encoder import QlikJsonEncoder

__all__ = ["QlikJsonDecoder", "QlikJsonEncoder"]
