"""``canal-json``: Canal flat messages, including Alibaba DTS "Canal Json"."""

from cdclake.formats.canal_json.decoder import CanalJsonDecoder
from cdclake.formats.canal_json.encoder import CanalJsonEncoder

__all__ = ["CanalJsonDecoder", "CanalJsonEncoder"]
