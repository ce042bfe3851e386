"""``canal-json``: Canal flat messages, including Alibaba DTS "Canal Json"."""

from cdclake.formats.canal_json.decoder import CanalJsonDecoder

__all__ = ["CanalJsonDecoder"]
