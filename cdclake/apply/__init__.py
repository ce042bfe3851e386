"""Appliers: canonical change events -> Delta tables. Apart from the decoders on purpose: an
applier knows nothing about wire formats, only :data:`cdclake.model.EVENT_SCHEMA`."""
