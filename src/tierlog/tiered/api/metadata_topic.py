"""Optional metadata capability: keeping the events in a log the broker provides."""

from __future__ import annotations

import abc

from tierlog.tiered.api.metadata_topic_io import MetadataTopicIO


class SupportsMetadataTopic(abc.ABC):
    """A ``RemoteLogMetadataManager`` whose events live in a log the broker hosts (Kafka's
    ``__remote_log_metadata``), reached through a ``MetadataTopicIO`` the broker supplies.

    A plugin declares the capability by inheriting this class; the broker checks it with
    ``isinstance`` and never probes for the methods. A metadata manager without it reaches
    its store by itself, and the broker only configures it.

    Contract:

    * The broker calls ``bind_metadata_topic`` once, after ``configure`` and before it reports
      any leadership; the plugin may not use the log before. It returns at once: creating or
      checking the topic happens in the plugin's own threads.
    * The broker then calls ``await_initialized`` from a worker thread (never the event
      loop) and serves no tiered partition until it returns. It returns once the log is
      usable, and raises once initialization failed for good (the plugin gives up after its
      own retry timeout; the broker then refuses to start), or ``TimeoutError`` when
      ``timeout_s`` passes first (None: wait for the plugin's own verdict).
    * The ``MetadataTopicIO`` stays valid until the plugin's ``close``.
    """

    @abc.abstractmethod
    def bind_metadata_topic(self, topic_io: MetadataTopicIO) -> None:
        """Give the manager its log; initialization waits for this."""

    @abc.abstractmethod
    def await_initialized(self, timeout_s: float | None = None) -> None:
        """Block until the log is usable; raise if initialization failed for good."""
