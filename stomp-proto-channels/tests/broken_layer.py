"""An in-memory channel layer that fails when told to, for the tests of what the
consumer does when the layer does (conftest.py configures it as "broken")."""

from __future__ import annotations

from typing import Any

from channels.layers import InMemoryChannelLayer


class BrokenLayer(InMemoryChannelLayer):  # type: ignore[misc]
    #: group_send raises while this is set.
    fail_sends = False
    #: So many calls of receive raise before it works again.
    fail_receives = 0

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if BrokenLayer.fail_sends:
            raise ConnectionError("the layer is down")
        await super().group_send(group, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        if BrokenLayer.fail_receives:
            BrokenLayer.fail_receives -= 1
            raise ConnectionError("the layer is down")
        message: dict[str, Any] = await super().receive(channel)
        return message
