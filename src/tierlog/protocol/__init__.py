"""Sans-IO Kafka wire protocol: frames in, typed requests out, responses to bytes.

Nothing in this package touches sockets or asyncio, so every protocol rule can be tested
with plain byte strings (the h11 approach).
"""
