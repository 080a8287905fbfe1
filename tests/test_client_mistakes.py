"""Client mistakes against RabbitMQ, ActiveMQ and the embedded broker: the embedded broker
takes what both real brokers take.

Every mistake of ``client_mistakes.MISTAKES`` is played, byte for byte, against
the two real brokers and the embedded one, lenient (the default) and
``strict=True``.  The tests then check:

* the lenient mode accepts every mistake both real brokers accept, with the
  same outcome (the version negotiated, the message delivered);
* it refuses every mistake both real brokers refuse, except those listed in
  ``LENIENT_BEYOND_BROKERS`` (documented in docs/connection.rst);
* the strict mode never accepts what the lenient one refuses;
* the table in docs/interop.rst ("Client mistakes") is what was measured, so it
  cannot go stale: when a broker changes, this test says which cell to update
  (``python tests/client_mistakes.py`` prints the whole table).

Real brokers that are down skip these tests, or fail them under ``CI=true``
(see tests/brokers.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from adapter_harness import ServiceLoop
from brokers import Endpoint, real_broker
from client_mistakes import ACCEPTED, COLUMNS, MISTAKES, REFUSED, parse_table, probe

pytestmark = pytest.mark.timeout(300)

DOCS = Path(__file__).parent.parent / "docs" / "interop.rst"
#: What the lenient mode accepts although both real brokers refuse it: nothing.
#: (Lower-case commands were, until the lenient server mode stopped reading
#: commands case-insensitively; docs/connection.rst, "Strict and lenient servers".)
LENIENT_BEYOND_BROKERS: set[str] = set()
KEYS = [m.key for m in MISTAKES]


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, dict[str, str]]]:
    """Every mistake against every broker: mistake key -> column -> outcome."""
    targets = {"RabbitMQ": real_broker("rabbitmq"), "ActiveMQ": real_broker("activemq")}
    service = ServiceLoop()
    try:
        for column, strict in (("embedded lenient", False), ("embedded strict", True)):
            # No users: like both real brokers here, anonymous logins are allowed.
            broker = service.call(service.start_broker(0, False, {"strict": strict}))
            targets[column] = Endpoint("embedded", broker.port)
        yield {m.key: {c: probe(m, t) for c, t in targets.items()} for m in MISTAKES}
    finally:
        assert service.close() == []


def accepted(outcome: str) -> bool:
    return outcome in ACCEPTED


def refused(outcome: str) -> bool:
    return outcome in REFUSED


def test_lenient_mode_accepts_what_both_real_brokers_accept(
    outcomes: dict[str, dict[str, str]],
) -> None:
    both = {
        key: row
        for key, row in outcomes.items()
        if accepted(row["RabbitMQ"]) and accepted(row["ActiveMQ"])
    }
    # stomp.py's default CONNECT (STOMP 1.1, as a STOMP frame, no host header): both
    # brokers take it, so the embedded one must too.
    assert "stomp-no-host" in both
    wrong = {
        key: row
        for key, row in both.items()
        if not accepted(row["embedded lenient"])
        or (row["RabbitMQ"] == row["ActiveMQ"] and row["embedded lenient"] != row["RabbitMQ"])
    }
    assert wrong == {}


def test_lenient_mode_refuses_what_both_real_brokers_refuse(
    outcomes: dict[str, dict[str, str]],
) -> None:
    both = {
        key: row
        for key, row in outcomes.items()
        if refused(row["RabbitMQ"]) and refused(row["ActiveMQ"])
    }
    assert "lowercase-send" in both and "nack-10" in both
    beyond = {key for key, row in both.items() if not refused(row["embedded lenient"])}
    assert beyond == LENIENT_BEYOND_BROKERS
    assert all(accepted(both[key]["embedded lenient"]) for key in beyond)


def test_strict_mode_refuses_what_the_lenient_mode_refuses(
    outcomes: dict[str, dict[str, str]],
) -> None:
    wrong = {
        key: row
        for key, row in outcomes.items()
        if refused(row["embedded lenient"]) and not refused(row["embedded strict"])
    }
    assert wrong == {}
    # ... and refuses every mistake that both real brokers accept but the specs forbid.
    assert {
        key
        for key, row in outcomes.items()
        if accepted(row["embedded lenient"]) and refused(row["embedded strict"])
    } >= {"no-host-11", "no-host-12", "stomp-no-host", "crlf-10", "crlf-11", "connect-body"}


def test_docs_table_is_what_was_measured(outcomes: dict[str, dict[str, str]]) -> None:
    written = parse_table(DOCS.read_text(encoding="utf-8"))
    assert set(written) == set(KEYS), "docs/interop.rst misses rows (or has others)"
    stale = [
        f"{key}: {column}: docs say {written[key][column]!r}, measured {outcomes[key][column]!r}"
        for key in KEYS
        for column in COLUMNS
        if written[key][column] != outcomes[key][column]
    ]
    assert stale == [], "\n".join(stale)
