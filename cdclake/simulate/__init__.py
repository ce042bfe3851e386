"""Seeded, deterministic simulation of a source database's change stream, for tests and benchmarks.

:class:`Workload` models a few source tables (single-column key, composite key, no key) and
produces the canonical events (:data:`cdclake.model.EVENT_SCHEMA` rows as dicts) of an initial
snapshot followed by transactions, DDL, truncates and heartbeats, together with the exact final
content of every table. Pure Python on the driver: it is a test and benchmark tool, not a hot path.
"""

from cdclake.simulate.workload import FORMAT, SimResult, Workload, encode_value, split_batches

__all__ = ["FORMAT", "SimResult", "Workload", "encode_value", "split_batches"]
