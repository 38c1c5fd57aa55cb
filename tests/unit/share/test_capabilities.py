"""ShareCapabilities: one place says whether a v2 share feature can be used."""

from __future__ import annotations

import pytest

from kafka_share.errors import UnsupportedVersionError
from kafka_share.share.capabilities import ShareCapabilities, ShareFeature


@pytest.mark.parametrize("feature", list(ShareFeature))
def test_v2_supports_every_feature(feature: ShareFeature) -> None:
    ShareCapabilities(2).require(feature)
    assert ShareCapabilities(2).supports(feature)


def test_v1_refuses_renew_naming_the_feature_the_version_and_what_to_do() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        ShareCapabilities(1).require(ShareFeature.RENEW)
    message = str(info.value)
    assert "AcknowledgeType.RENEW" in message and "Kafka 4.2+" in message
    assert "only supports v1" in message and "ACCEPT or RELEASE" in message


def test_v1_refuses_record_limit_and_suggests_batch_optimized() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"record_limit.*batch_optimized"):
        ShareCapabilities(1).require(ShareFeature.RECORD_LIMIT)
