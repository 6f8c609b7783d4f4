"""tierlog: a Kafka-compatible log server with tiered storage."""
