"""A stage's errors name its options as the user gave them, under the stage's prefix."""

from __future__ import annotations

import pytest

from sources import DataLossError, InvalidOptionError
from sources.prefixed_options import PrefixedOptions

LIVE = PrefixedOptions.of("live.", ["failOnDataLoss", "kafka.", "subscribe"])


def test_an_invalid_option_gets_the_prefix_in_its_field_and_message() -> None:
    with pytest.raises(InvalidOptionError) as raised, LIVE.naming_errors():
        raise InvalidOptionError(
            "splitsource.kafka", "subscribe", "names no topic; set 'subscribe'", ["subscribe"]
        )

    assert raised.value.option == "live.subscribe"
    assert raised.value.valid == ("live.subscribe",)
    assert str(raised.value) == (
        "Option 'live.subscribe' of splitsource.kafka: names no topic; set 'live.subscribe'. "
        "Valid options for splitsource.kafka: live.subscribe."
    )


def test_prose_names_the_options_it_mentions_and_is_named_once() -> None:
    inner = PrefixedOptions.of("archive.", ["failOnDataLoss"])
    with pytest.raises(DataLossError) as raised, inner.naming_errors(), LIVE.naming_errors():
        raise DataLossError("offsets were lost; set failOnDataLoss=false to read on")

    assert str(raised.value) == "offsets were lost; set live.failOnDataLoss=false to read on"
