"""The checker's tests: the embedded broker, proxies and clients of their own, and the
RabbitMQ and ActiveMQ that the repository's ``scripts/start-brokers.sh`` starts
(``scripts/test.sh`` does).

The repository's ``tests/`` folder is put last on ``sys.path``: these tests find the
real brokers, and the stompjs echo script, with the helpers the core's tests use
(``brokers``, ``test_stompjs_interop``), rather than with copies of them.  A real
broker that does not answer skips its tests, except under ``CI=true``.
"""

from __future__ import annotations

import sys
from pathlib import Path

CORE_TESTS = Path(__file__).resolve().parents[2] / "tests"
if str(CORE_TESTS) not in sys.path:
    sys.path.append(str(CORE_TESTS))
