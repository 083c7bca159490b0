"""The fixtures' old path, kept because installed environments and ``-p`` options name it:
an install made before the move registers ``presence_app.pytest_plugin`` as its ``pytest11``
entry point. The fixtures live in :mod:`presence_app.testing.pytest_plugin`."""

from presence_app.testing.pytest_plugin import (
    presence,
    presence_channel_layer,
    presence_clock,
    presence_redis_url,
    presence_touches,
)

__all__ = [
    "presence",
    "presence_channel_layer",
    "presence_clock",
    "presence_redis_url",
    "presence_touches",
]
