"""Helpers for development and tests that are not part of the pipeline itself.

* :mod:`cdclake.testing.kafka_broker`: a real single-node Apache Kafka broker (KRaft) on
  127.0.0.1, run from the jars that ``bin/setup`` copies into ``.jars/kafka``; used by
  ``bin/kafka`` and by the ``kafka_broker`` test fixture.
* :mod:`cdclake.testing.spark_cluster`: a standalone Spark cluster on localhost (one master,
  workers with their own work folders) started from the PySpark installation; used by
  ``tests/test_cluster.py``.
"""
