"""The test suite, a package: modules import each other as ``tests.<dir>.<module>``.

Unit tests mirror ``src/tierlog``: the tests of ``tierlog.<pkg>.<module>`` live in
``tests/<pkg>/`` (``tests/protocol/test_codec.py`` tests ``tierlog.protocol.codec``,
``tests/server/group/`` tests ``tierlog.server.group``, ``tests/config/`` tests
``tierlog.config``). Suites that cross packages have directories of their own: ``clients``
(real Kafka clients against a broker), ``reliability`` and ``crash`` (end-to-end faults,
marked ``slow``), ``spark`` (a real SparkSession, marked ``spark``), and the ``e2e``
directories under ``tiered`` and ``storage``. Shared helpers are in ``tests/helpers``, or in
a ``*_helpers.py`` module next to the tests that share them; a ``conftest.py`` holds
fixtures and hooks (and what only they use), and no test module imports from one.
"""
