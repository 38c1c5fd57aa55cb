"""The Kafka error codes the share engine makes decisions on.

The engine works with plain ints so it stays independent of the exception
classes; the consumer maps codes to exceptions at its boundary.
"""

from __future__ import annotations

from typing import Final

NONE: Final = 0
UNKNOWN_SERVER_ERROR: Final = -1
NOT_LEADER_OR_FOLLOWER: Final = 6
NETWORK_EXCEPTION: Final = 13
COORDINATOR_LOAD_IN_PROGRESS: Final = 14
COORDINATOR_NOT_AVAILABLE: Final = 15
NOT_COORDINATOR: Final = 16
UNKNOWN_MEMBER_ID: Final = 25
TOPIC_AUTHORIZATION_FAILED: Final = 29
GROUP_AUTHORIZATION_FAILED: Final = 30
UNSUPPORTED_VERSION: Final = 35
INVALID_REQUEST: Final = 42
GROUP_ID_NOT_FOUND: Final = 69
GROUP_MAX_SIZE_REACHED: Final = 81
FENCED_MEMBER_EPOCH: Final = 110
UNSUPPORTED_ASSIGNOR: Final = 112
INVALID_RECORD_STATE: Final = 121
SHARE_SESSION_NOT_FOUND: Final = 122
INVALID_SHARE_SESSION_EPOCH: Final = 123
SHARE_SESSION_LIMIT_REACHED: Final = 133
