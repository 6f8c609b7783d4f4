"""What a storage plugin keeps, seen from outside: the audit and usage jobs' handle on the
configured plugin's ``SupportsInventory`` (``tierlog.tiered.api``).

Every question about keys, layout and expected sizes is the plugin's own; this module only
loads the plugin by name (on the driver and again on each executor, from the picklable
spec), turns its listing into rows the jobs join on, and deletes in batches with progress.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tierlog.spark.options import OptionError
from tierlog.spark.segments import RsmSpec, storage_plugin
from tierlog.tiered.api import StoredObject, SupportsInventory, SupportsSegmentManifests

#: One row per listed object: ``base`` is the plugin's segment key (null for an object that
#: is not one of its segment objects), ``kind`` an ``ObjectKind`` value.
OBJECT_DDL = "key string, size long, base string, kind string, topic_id string"

#: Objects deleted per plugin call (and per progress step).
DELETE_BATCH = 100


@dataclass(frozen=True)
class Inventory:
    """Picklable: executors rebuild the plugin from `spec`."""

    spec: RsmSpec

    @classmethod
    def of(cls, spec: RsmSpec) -> Inventory:
        """Refuses a plugin that cannot describe its objects, or whose objects cannot be
        reached from here."""
        inventory = cls(spec)
        inventory.plugin.location()
        return inventory

    @property
    def plugin(self) -> SupportsInventory:
        rsm = storage_plugin(self.spec)
        if not isinstance(rsm, SupportsInventory):
            raise OptionError(
                f"storage plugin {self.spec.class_name!r} cannot be audited: it does not "
                "describe its objects (tierlog.tiered.api.SupportsInventory)"
            )
        return rsm

    @property
    def manifests(self) -> SupportsSegmentManifests | None:
        """The plugin, when its segments describe themselves in manifests."""
        plugin = self.plugin
        return plugin if isinstance(plugin, SupportsSegmentManifests) else None

    def describe(self) -> str:
        return self.plugin.location()

    def listing(self) -> list[StoredObject]:
        """Every object the plugin holds (not its own bookkeeping files)."""
        return [o for page in self.plugin.list_objects() for o in page]

    def object_rows(self, listing: Iterable[StoredObject]) -> list[tuple[Any, ...]]:
        """``listing`` as rows of ``OBJECT_DDL``."""
        plugin = self.plugin
        rows: list[tuple[Any, ...]] = []
        for o in listing:
            found = plugin.identify(o.key)
            if found is None:
                rows.append((o.key, o.size, None, None, None))
            else:
                rows.append(
                    (o.key, o.size, found.segment_key, found.kind.value, str(found.topic_id))
                )
        return rows

    def delete(self, keys: Iterable[str], progress: Callable[[int], None]) -> None:
        """Delete objects by key (a missing one counts as deleted), reporting each batch."""
        plugin = self.plugin
        batch: list[str] = []
        for key in keys:
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                plugin.delete_objects(batch)
                progress(len(batch))
                batch = []
        if batch:
            plugin.delete_objects(batch)
            progress(len(batch))
