"""The registry of formats: one package per wire format under ``cdclake/formats/<name>/``.

``get(name)`` returns the decoder registered under a name or alias; an unknown name raises
``CdclakeError(UNKNOWN_FORMAT)`` listing the known ones.
"""

from __future__ import annotations

from cdclake.errors import CdclakeError
from cdclake.formats.base import Decoder, DecodeOptions
from cdclake.formats.facts import Capabilities

_REGISTRY: dict[str, Decoder] = {}
_ALIASES: dict[str, str] = {}


def register(decoder: Decoder) -> Decoder:
    """Add ``decoder`` under its ``name`` and ``aliases``; returns it."""
    _REGISTRY[decoder.name] = decoder
    for alias in decoder.aliases:
        _ALIASES[alias] = decoder.name
    return decoder


def names() -> list[str]:
    """Registered format names and aliases, sorted, plus ``auto``."""
    return sorted(["auto", *_REGISTRY, *_ALIASES])


def get(name: str) -> Decoder:
    """The decoder for ``name`` (a format name or alias).

    Raises:
        CdclakeError(UNKNOWN_FORMAT): no such format; the message lists the known names.
    """
    key = _ALIASES.get(name, name)
    if key not in _REGISTRY:
        raise CdclakeError(
            "UNKNOWN_FORMAT", f"unknown format {name!r}; known formats: {', '.join(names())}"
        )
    return _REGISTRY[key]


def snapshot_position_formats() -> list[str]:
    """Names of the formats whose snapshot rows order with streamed changes by position
    (:attr:`Capabilities.snapshot_positions`)."""
    return sorted(n for n, d in _REGISTRY.items() if d.capabilities.snapshot_positions)


def update_halves_formats() -> list[str]:
    """Names of the formats that write an update as two records, a before and an after half
    (:attr:`Capabilities.update_halves`)."""
    return sorted(n for n, d in _REGISTRY.items() if d.capabilities.update_halves)


def all_decoders() -> list[Decoder]:
    """Every registered decoder, by name."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


#: the built-in format packages, each exporting one Decoder class named after its format
BUILTIN = {
    "cdclake.formats.canal_json": "CanalJsonDecoder",
    "cdclake.formats.debezium_json": "DebeziumJsonDecoder",
    "cdclake.formats.dataworks_json": "DataWorksJsonDecoder",
    "cdclake.formats.dts_avro": "DtsAvroDecoder",
    "cdclake.formats.shareplex_json": "ShareplexJsonDecoder",
    "cdclake.formats.datahub_tuple": "DatahubTupleDecoder",
    "cdclake.formats.qlik_json": "QlikJsonDecoder",
}


def _register_builtin() -> None:
    import importlib

    for module, cls in BUILTIN.items():
        register(getattr(importlib.import_module(module), cls)())


_register_builtin()



def get_encoder(name: str):
    """The encoder (:class:`cdclake.formats.encoding.Encoder`) of format ``name`` (a name or
    alias): the class named ``<Format>Encoder`` in ``cdclake/formats/<package>/encoder.py``.

    Raises:
        CdclakeError(UNKNOWN_FORMAT): no such format (the message lists the known names).
        CdclakeError(NOT_IMPLEMENTED): the format's package has no encoder.
    """
    import importlib

    decoder = get(name)
    module = type(decoder).__module__.rsplit(".", 1)[0]
    cls = type(decoder).__name__.replace("Decoder", "Encoder")
    try:
        return getattr(importlib.import_module(f"{module}.encoder"), cls)()
    except (ImportError, AttributeError) as e:
        raise CdclakeError("NOT_IMPLEMENTED", f"format {decoder.name!r} has no encoder ({e})") from e


__all__ = ["Capabilities", "Decoder", "DecodeOptions", "register", "get", "get_encoder", "names", "all_decoders"]
