"""The blocking client offers what the async client offers, with the same signatures.

``stomp_proto.threads`` is written separately from the async client (it has no
event loop), so nothing but this test keeps their APIs from drifting apart.
Parameters must match in name, kind, default and annotation; only the return
annotations differ where one side is a context manager or iterator of the
other's async counterpart.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

import stomp_proto.asyncio
import stomp_proto.threads
import stomp_proto.trio
from stomp_proto._client._async import (
    AsyncClient,
    AsyncSubscription,
    AsyncTransaction,
    AsyncUnsolicited,
)
from stomp_proto.threads import Client, Subscription, Transaction, Unsolicited

PAIRS = [
    (Client, AsyncClient),
    (Subscription, AsyncSubscription),
    (Transaction, AsyncTransaction),
    (Unsolicited, AsyncUnsolicited),
]


#: What only the blocking client has: an event loop that reads its socket on the
#: loop's thread (an async client already runs on its event loop).
BLOCKING_ONLY = {"fileno", "loop_reads", "pump"}


def _public(cls: type) -> set[str]:
    names = {name for name in dir(cls) if not name.startswith("_")}
    return names - BLOCKING_ONLY if cls is Client else names


def _parameters(function: Callable[..., object]) -> list[tuple[str, object, object, object]]:
    signature = inspect.signature(function)
    return [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]


@pytest.mark.parametrize(("blocking", "asynchronous"), PAIRS, ids=lambda c: c.__name__)
def test_same_public_names(blocking: type, asynchronous: type) -> None:
    assert _public(blocking) == _public(asynchronous)


@pytest.mark.parametrize(("blocking", "asynchronous"), PAIRS, ids=lambda c: c.__name__)
def test_same_parameters(blocking: type, asynchronous: type) -> None:
    checked = 0
    for name in sorted(_public(blocking)):
        ours, theirs = getattr(blocking, name), getattr(asynchronous, name)
        if not callable(ours) or isinstance(ours, type):
            continue
        assert _parameters(ours) == _parameters(theirs), name
        checked += 1
    assert checked  # the comparison ran over real methods


def test_the_names_only_the_blocking_client_has_are_its_own() -> None:
    public = {name for name in dir(Client) if not name.startswith("_")}
    assert public >= BLOCKING_ONLY
    assert not BLOCKING_ONLY & {name for name in dir(AsyncClient) if not name.startswith("_")}


def test_connect_functions_take_the_same_arguments() -> None:
    expected = _parameters(stomp_proto.threads.connect)
    assert _parameters(stomp_proto.asyncio.connect) == expected
    assert _parameters(stomp_proto.trio.connect) == expected


def test_help_of_client_options_lists_every_option_with_its_default() -> None:
    """``help(ClientOptions)`` shows the docstring: one line per option, its default
    next to it, exactly the options there are; the clients' page lists each too."""
    import pydoc
    from pathlib import Path

    from stomp_proto import ClientOptions

    shown = pydoc.render_doc(ClientOptions, renderer=pydoc.plaintext).splitlines()
    start = next(n for n, line in enumerate(shown) if "All are optional" in line) + 2
    # The block up to the next blank line (" |  " or " |": pydoc's margin differs
    # between Python versions).
    end = next(n for n in range(start, len(shown)) if shown[n].strip() in ("", "|"))
    table = shown[start:end]
    listed = [line.split()[1] for line in table]
    options = list(ClientOptions.__annotations__)
    assert "headers" in options and "retry_first_connect" in options
    assert listed == options  # each once, in the order declared
    page = (Path(__file__).parent.parent / "docs" / "clients.rst").read_text(encoding="utf-8")
    for name in options:
        assert f"* - ``{name}``" in page, f"docs/clients.rst's options table lacks {name}"
