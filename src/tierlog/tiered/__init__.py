"""KIP-405 tiered storage.

``api`` is the plugin surface (value types, state machines, the two plugin interfaces) and
depends on nothing else in tierlog, so a plugin author only needs that package.
``metadata`` holds the default, topic-based metadata manager.
"""
