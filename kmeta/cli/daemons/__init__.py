"""The daemon commands (``kmeta broker``, ``kmeta controller``), their flags in groups as
Kafka's configs group them, where settings come from (flags, ``KMETA_*``, a TOML file), the
logging set-up, ``kmeta config show`` and ``kmeta storage``."""
