"""pytest configuration for the stomp_proto test suite.

Hypothesis profiles (pick one with ``HYPOTHESIS_PROFILE=<name>``):

* ``ci`` (default): 200 examples per property, no deadline (shared CI machines
  are noisy, and a deadline would turn load spikes into flaky failures);
* ``dev``: 25 examples, for a quick local loop;
* ``thorough``: 5000 examples, for an occasional long fuzzing run;
* ``fuzz``: ``FUZZ_EXAMPLES`` examples (default 2000): what ``scripts/fuzz.sh``
  runs when atheris is not installed.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=5000,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    deadline=None,
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "2000")),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: object) -> None:
    """Under ``STOMP_PROTO_TEST_INSTALLED=1`` refuse to run against the checkout.

    ``scripts/test.sh`` sets it when it runs the suite against the built wheel; a
    ``stomp_proto`` imported from anywhere but the venv's site-packages would test the
    source tree instead, and a file missing from the wheel would go unnoticed.
    """
    if os.environ.get("STOMP_PROTO_TEST_INSTALLED") == "1":
        from packaging_checks import installed_location_problem

        problem = installed_location_problem()
        if problem:
            raise SystemExit(f"STOMP_PROTO_TEST_INSTALLED=1 but {problem}")
