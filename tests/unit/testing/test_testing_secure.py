"""SecureKafkaCluster's settings reach the broker harness it builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_share.testing import local
from kafka_share.testing.secure import SecureKafkaCluster


class _RefusedError(Exception):
    pass


def test_share_version_and_extra_config_reach_the_local_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def recording(**kwargs: Any) -> None:
        seen.update(kwargs)
        raise _RefusedError  # stop before any broker starts

    monkeypatch.setattr(local, "LocalKafkaCluster", recording)
    secured = SecureKafkaCluster(work_dir=tmp_path, share_version=2,
                                 extra_config={"x.y": "1"})
    with pytest.raises(_RefusedError):
        secured.start()
    assert seen["share_version"] == 2
    assert seen["share_enabled"] is True
    assert seen["extra_config"] == {"x.y": "1"}
