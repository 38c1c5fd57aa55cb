"""The share consume manager: ShareFetch and ShareAcknowledge for every broker node.

- :mod:`.manager`: ``ShareConsumeManager``, which orders each round's
  acknowledgements, renewals and fetches (its theory of operation).
- :mod:`.nodes`: per-node state (session, waiting acknowledgements, backoff)
  and one ``commit_sync`` or close spanning nodes.
- :mod:`.errors`: what each error code of a share response leads to.
- :mod:`.wire`: the requests' topic lists and the guard of v2-only features.
"""

from kafka_share.share.consume.manager import ACK_LINGER_MS, FetchSettings, ShareConsumeManager

__all__ = ["ACK_LINGER_MS", "FetchSettings", "ShareConsumeManager"]
