"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-219): entities and their settings, the
windowed rates that throttle clients, the quota APIs' decisions and where settings live."""
