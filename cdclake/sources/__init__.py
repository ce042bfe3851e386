"""Where raw records come from: files (:mod:`.files`) and Kafka (:mod:`.kafka`). Every source
returns a DataFrame of :data:`cdclake.model.RAW_SCHEMA`."""
