"""Sans-IO share-group engine.

Everything in this package is plain single-threaded state: no sockets, no
threads and no clock reads. Time comes in as ``now_ms`` and requests go out as
typed plans that the network layer maps onto wire messages.

Modules, one job each:

- :mod:`.acknowledgements`: per-partition offset -> acknowledge type map and
  its coalescing into wire acknowledgement batches.
- :mod:`.acquired`: matching fetched records against the acquired ranges of a
  ShareFetch response (delivery counts and GAP offsets).
- :mod:`.session`: one share session per broker node (epochs, partition diff).
- :mod:`.membership`: the ShareGroupHeartbeat state machine.
- :mod:`.backoff`: exponential backoff with jitter and ``RequestState``.
- :mod:`.coordinator`: FindCoordinator discovery state for the group.
- :mod:`.held`: the ledger of records held from acquisition until their
  acknowledgement completes (lock deadlines, re-sent acquisitions).
- :mod:`.renewal`: when ``share.auto.renew`` renews which held locks.
"""
