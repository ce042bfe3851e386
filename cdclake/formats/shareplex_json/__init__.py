"""``shareplex-json``: Alibaba DTS "Shareplex Json" messages (Oracle sources, partial updates)."""

from cdclake.formats.shareplex_json.decoder import ShareplexJsonDecoder
from cdclake.formats.shareplex_json.encoder import ShareplexJsonEncoder

__all__ = ["ShareplexJsonDecoder", "ShareplexJsonEncoder"]
