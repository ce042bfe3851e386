"""Helpers for development and tests that are not part of the pipeline itself.

* :mod:`cdclake.testing.kafka_broker`: a real single-node Apache Kafka broker (KRaft) on
  127.0.0.1, run from the jars that ``bin/setup`` copies into ``.jars/kafka``; used by
  ``bin/kafka`` and by the ``kafka_broker`` test fixture.
"""
