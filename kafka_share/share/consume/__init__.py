"""The share consume manager: ShareFetch and ShareAcknowledge for every broker node.

- :mod:`.manager`: ``ShareConsumeManager``, which orders each round's
  acknowledgements, renewals and fetches (its theory of operation).
- :mod:`.context`: the state the parts share (settings, nodes, held records,
  the consumer's phase).
- :mod:`.acknowledging`: the asynchronous, ``commit_sync`` and close flows and
  their deadlines.
- :mod:`.fetching`: the fetch rounds, building ShareFetch requests and taking
  their answers.
- :mod:`.renewing`: ``share.auto.renew``, renewing held records' locks.
- :mod:`.completion`: how an acknowledgement ends (reported, settled, the
  waiting commit resolved).
- :mod:`.responses`: share responses read into plain outcomes.
- :mod:`.nodes`: per-node state (session, waiting acknowledgements, backoff)
  and one ``commit_sync`` or close spanning nodes.
- :mod:`.errors`: what each error code of a share response leads to.
- :mod:`.wire`: the requests' topic lists and the guard of v2-only features.
"""

from kafka_share.share.consume.context import ACK_LINGER_MS, FetchSettings
from kafka_share.share.consume.manager import ShareConsumeManager

__all__ = ["ACK_LINGER_MS", "FetchSettings", "ShareConsumeManager"]
