"""``shareplex-json``: Alibaba DTS "Shareplex Json" messages (Oracle sources, partial updates)."""

from cdclake.formats.shareplex_json.decoder import ShareplexJsonDecoder

__all__ = ["ShareplexJsonDecoder"]
