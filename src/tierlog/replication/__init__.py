"""Replication in cluster mode (spec/kafka-replication.md §3-5): one ``Partition`` per
replica this broker holds (leader epoch, ISR, follower states, HW), the ``ReplicaManager``
that applies the cluster view to them and owns the follower fetchers and acks=all waiters.

Single-node mode never builds any of it: ``replication_for`` returns None and every handler
keeps its single-node path.
"""
