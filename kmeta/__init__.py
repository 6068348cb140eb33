"""kmeta: a Kafka-compatible metadata plane (controller, brokers, asyncio client)."""

__version__ = "0.1.0"
