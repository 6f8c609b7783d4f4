"""Storage plugins (RemoteStorageManager implementations).

Importing this package must not import any plugin: the broker resolves plugins by name
through ``tierlog.tiered.api.RSM_ALIASES`` and ``tierlog.tiered.api.load_plugin``, so a
broker configured with the directory plugin never loads the object-store client libraries.
"""
