"""Cluster coordination through ZooKeeper, with Kafka's znode layout (spec/kafka-replication.md §6).

A layer of its own: it may import ``tierlog.config`` and ``tierlog.protocol``, never
``tierlog.server``; the server drives it. ZooKeeper is the only consensus engine: this
package never decides anything that a conditional ZooKeeper write has not confirmed.

Modules, one concept each:

* ``settings``: the cluster-mode settings taken from a ``BrokerConfig``.
* ``zookeeper``: the kazoo client wrapper (chroot creation, persistent roots, sessions).
* ``paths`` and ``znodes``: Kafka's znode layout and the JSON of each znode.
* ``registration``: the broker's ephemeral ``/brokers/ids/<id>``.
* ``election`` and ``fencing``: one controller election attempt and the epoch-fenced writes
  of the elected controller.
* ``member``: ``ClusterMember``, which keeps a broker registered and contending.
* ``cluster_view``: ``ClusterView``, a broker's watch-fed picture of brokers, controller,
  topics and partition states, applied by epoch.
* ``controller``: the controller's level-triggered partition duties (new partitions, offline
  and unclean elections, ISR removal of offline brokers, reassignment completion, topic
  deletion, the rebalance timer).
* ``node``: ``ClusterNode``, membership + view + controller, what the server starts.
* ``assignment``: Kafka's (rack-aware) round-robin replica assignment, a pure function.
* ``topic_creation``: the controller's fenced writes for a new topic.
* ``leader_election``: the controller's election strategies (new, offline, unclean,
  reassignment, preferred, controlled shutdown), pure functions over partition states.
* ``leader_elections``: elections on request (ElectLeaders) and for the rebalance, written.
* ``rebalance``: Kafka's leader-imbalance rule, a pure choice.
* ``reassignment``: KIP-455 replica sets in the topic znode, started, completed, cancelled.
* ``topic_deletion``: the ``/admin/delete_topics`` request and the controller's deletion.
"""
