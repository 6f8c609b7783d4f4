"""Kafka's transaction coordinator, its pure parts: ``state.py`` holds the whole state machine
of a transactional id, ``schema.py`` the ``__transaction_state`` and marker record formats,
``load.py`` rebuilds a partition's ids from its records, ``admin.py`` answers
DescribeTransactions/ListTransactions, ``config.py`` holds the coordinator's
settings."""
