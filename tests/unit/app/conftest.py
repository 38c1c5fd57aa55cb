"""Fixtures shared by the application-layer tests."""

from __future__ import annotations

import importlib.util

import pytest

from kafka_share._app import decoding


@pytest.fixture(autouse=True, scope="session")
def _vectorised_decoder_loaded() -> None:
    """The harnesses decode large batches through numpy (``vectorised=True``,
    their default) from their first batch on, as a consumer does once the load
    its first such poll asked for is done. Without this, which tests decoded
    through numpy would depend on whether an earlier test had loaded it."""
    if importlib.util.find_spec("numpy") is not None:
        decoding._load_vectorised()
