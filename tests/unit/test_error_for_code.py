"""``error_for_code`` beyond the known table: unknown codes and codes that are not ints."""

from __future__ import annotations

import pytest

from kafka_share import errors as e


def test_unknown_code_message_names_the_code() -> None:
    err = e.error_for_code(4242)
    assert type(err) is e.BrokerError
    assert (err.code, err.name, err.retriable) == (4242, "UNKNOWN_ERROR_CODE_4242", False)
    assert str(err).startswith("unknown broker error code 4242: not among the Kafka error codes")
    with_message = e.error_for_code(-9, "new failure")
    assert str(with_message).startswith("unknown broker error code -9:")
    assert str(with_message).endswith("; broker message: new failure")


@pytest.mark.parametrize("bad", ["7", 7.0, None, True])
def test_error_for_code_refuses_a_code_that_is_not_an_int(bad: object) -> None:
    with pytest.raises(TypeError, match="a Kafka error code is an int"):
        e.error_for_code(bad)  # type: ignore[arg-type]
