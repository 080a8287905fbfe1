"""pytest configuration for the stomp_proto test suite.

Hypothesis profiles (pick one with ``HYPOTHESIS_PROFILE=<name>``):

* ``ci`` (default): 200 examples per property, no deadline (shared CI machines
  are noisy, and a deadline would turn load spikes into flaky failures);
* ``dev``: 25 examples, for a quick local loop;
* ``matrix``: 50 examples: what ``scripts/test.sh`` runs on the Pythons after 3.11,
  whose runs of the same properties take 200;
* ``thorough``: 5000 examples, for an occasional long fuzzing run;
* ``fuzz``: ``FUZZ_EXAMPLES`` examples (default 2000): what ``scripts/fuzz.sh``
  runs when atheris is not installed.
"""

from __future__ import annotations

import fcntl
import gc
import os
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=25)
settings.register_profile(
    "matrix",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
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

#: The Spark driver JVMs that the tests start, in this process or in the programs it
#: runs (pyspark reads this when it launches one): the client compiler only and the
#: serial collector.  A test's JVM lives for seconds to minutes on a few thousand rows,
#: where the optimizing compiler's threads cost more than they earn: measured on one
#: test, 14.6-19.5 CPU-s per JVM against 33.4-33.9 s with the defaults.  What the
#: sources and sinks do does not depend on it.  A PYSPARK_SUBMIT_ARGS of the user's
#: own is kept.
SPARK_TEST_SUBMIT_ARGS = (
    '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell'
)
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", SPARK_TEST_SUBMIT_ARGS)


#: How the name of a test module's background clean-up thread starts.
CLEAN_UP = "CLEAN_UP "


@pytest.fixture(scope="module", autouse=True)
def _clean_ups_end_with_their_module() -> Iterator[None]:
    """Wait, when a module ends, for the clean-up threads its tests left running (the
    Spark tests delete their RabbitMQ queues in the background, each thread's name
    starting with :data:`CLEAN_UP`): the module that runs next in the same process must not see
    their subprocesses' file descriptors come and go (the threads client's tests count
    them)."""
    yield
    for thread in threading.enumerate():
        if thread.name.startswith(CLEAN_UP):
            thread.join(300)


@pytest.fixture(scope="module", autouse=True)
def _one_lane_runs_spark_at_a_time(request: pytest.FixtureRequest) -> Iterator[None]:
    """In ``scripts/test.sh``'s serial lanes, which run side by side, a module of Spark
    tests waits until no other lane runs one: the lock file is the one
    ``STOMP_PROTO_SPARK_LOCK`` names.  Their JVMs keep both cores busy, and side by
    side the driver-kill and outage tests took 141 and 168 s, against 70 and 96 s
    apart."""
    lock_path = os.environ.get("STOMP_PROTO_SPARK_LOCK")
    if not lock_path or not request.path.stem.startswith("test_spark"):
        yield
        return
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection left in memory (every test module, hypothesis, trio ...).

    It lives as long as the run anyway.  Frozen objects are left out of garbage
    collections, so the full ``gc.collect()`` that the adapter harness makes
    after each test (to blame an unclosed socket on the test that left it)
    scans only what the tests made: about 5 ms instead of 40.
    """
    gc.collect()
    gc.freeze()


def pytest_configure(config: object) -> None:
    """Under ``STOMP_PROTO_TEST_INSTALLED=1`` refuse to run against the checkout, and
    under ``STOMP_PROTO_EXPECT_BUILD`` against another build than the one named.

    ``scripts/test.sh`` sets it when it runs the suite against the built wheel; a
    ``stomp_proto`` imported from anywhere but the venv's site-packages would test the
    source tree instead, and a file missing from the wheel would go unnoticed.
    """
    if os.environ.get("STOMP_PROTO_TEST_INSTALLED") == "1":
        from packaging_checks import installed_location_problem

        problem = installed_location_problem()
        if problem:
            raise SystemExit(f"STOMP_PROTO_TEST_INSTALLED=1 but {problem}")
    # scripts/test.sh sets it to "accelerated" for the accelerated wheel's venv: a core that
    # fell back to the pure-Python sources (a module missing, an import error hidden
    # by the .py beside it) would pass every test and test nothing native.
    expected = os.environ.get("STOMP_PROTO_EXPECT_BUILD")
    if expected:
        import stomp_proto

        if expected != stomp_proto.BUILD:
            raise SystemExit(
                f"STOMP_PROTO_EXPECT_BUILD={expected} but stomp_proto.BUILD is "
                f"{stomp_proto.BUILD!r} ({stomp_proto.__file__})"
            )


#: Every test module belongs to one layer, given to its tests as a marker:
#: ``pytest -m core``, ``-m "core or clients"``, ``-m "not interop"``.  A module
#: missing from this table fails the collection, so no test goes unsorted.
LAYERS: dict[str, tuple[str, ...]] = {
    # the sans-IO core: codec, events, state tables, connections, limits
    "core": (
        "test_after_close",
        "test_captured_vectors",
        "test_client_connection",
        "test_connection_stateful",
        "test_decoder_chunking",
        "test_decoder_fastpaths",
        "test_decoder_linear",
        "test_decoder_memory",
        "test_decoder_reentry",
        "test_decoder_spec",
        "test_encoder",
        "test_encoder_fastpaths",
        "test_error_contents",
        "test_event_edges",
        "test_events",
        "test_frame",
        "test_headers",
        "test_heartbeat",
        "test_layers",
        "test_limits",
        "test_native_touches",
        "test_native_differential",
        "test_roundtrip",
        "test_server_connection",
        "test_session_back_to_back",
        "test_session_endings",
        "test_split_independence",
        "test_state_tables",
        "test_version_grammars",
    ),
    # the asyncio, trio and threads clients, WebSocket, the examples
    "clients": (
        "test_ack_outbox",
        "test_careless_calls",
        "test_adapter_faults",
        "test_adapters",
        "test_async_writers",
        "test_chaos",
        "test_chaos_processes",
        "test_client_core",
        "test_client_faults",
        "test_client_signatures",
        "test_error_arrives",
        "test_examples",
        "test_failover",
        "test_hostile_brokers",
        "test_plain_socket_example",
        "test_refusals",
        "test_threads_concurrency",
        "test_on_message",
        "test_stomppy",
        "test_stomppy_cli",
        "test_native_api",
        "test_threads_read_role",
        "test_threads_pump",
        "test_tracing",
        "test_url",
        "test_url_secrets",
        "test_client_lifecycle",
        "test_uvloop",
        "test_websocket",
    ),
    # the embedded broker and the command line
    "broker": (
        "test_asgi",
        "test_asgi_relay",
        "test_asgi_uvicorn",
        "test_asgi_workers",
        "test_broker_core",
        "test_broker_metrics",
        "test_broker_abuse",
        "test_broker_connections",
        "test_broker_access",
        "test_broker_server",
        "test_broker_vectors",
        "test_cli",
        "test_check_shim",
        "test_hostile_peers",
    ),
    "spark": (
        "test_spark_integration",
        "test_spark_kafka_parity",
        "test_spark_logic",
        "test_spark_streams_discovery",
        "test_spark_streams_exactly_once",
        "test_spark_streams_broker_restart",
        "test_spark_queue_broker_restart",
        "test_spark_docs_examples",
        "test_spark_streams_logic",
        "test_spark_streams_rabbitmq",
        "test_spark_streams_rows",
        "test_spark_streams_sink_exactly_once",
    ),
    # real brokers and other projects' clients
    "interop": (
        "test_browser_asgi",
        "test_browser_stompjs",
        "test_chaos_rabbitmq",
        "test_client_matrix",
        "test_client_mistakes",
        "test_interop_brokers",
        "test_durable_subscriptions",
        "test_request_reply",
        "test_interop_websocket",
        "test_stompjs_interop",
        "test_stomppy_brokers",
        "test_stomppy_interop",
        "test_stompman_interop",
    ),
    # long randomized runs of the core's properties
    "fuzz": ("test_decoder_fuzz", "test_fuzz_properties"),
    # the package, its documentation and the accelerated build
    "tooling": (
        "test_api_documented",
        "test_docs_pages",
        "test_docs_inventory",
        "test_accelerated_build",
        "test_build_hook",
        "test_packaging",
        "test_distributions",
        "test_scripts",
        "test_timeouts",
    ),
    # left out of a plain ``pytest`` run (see pyproject.toml); scripts/test.sh runs it
    "benchmark": ("test_benchmarks_smoke",),
}
_LAYER_OF = {module: layer for layer, modules in LAYERS.items() for module in modules}

#: The tests that must run alone, marked ``serial``: a module, or a test of a module.
#: ``scripts/test.sh`` runs the rest in parallel (pytest-xdist, and several runs side
#: by side), then these in one process, with nothing else running; it gives that
#: process only the modules named here, so a test marked ``serial`` in its module
#: must be named here too (collection fails otherwise).  Why each:
SERIAL: dict[str, str] = {
    "test_chaos_rabbitmq": "a fault-injecting proxy and a workload that saturates RabbitMQ",
    "test_chaos_processes": "asserts how long a failover takes (hung, frozen and killed "
    "brokers, in processes of their own)",
    "test_interop_brokers::test_fault_frozen_broker": "freezes a real broker (SIGSTOP): "
    "every other test on it would fail meanwhile",
    "test_interop_brokers::test_fault_broker_restart_mid_stream": "restarts a real broker",
    "test_adapters::test_heartbeats_keep_an_idle_connection_alive": "100 ms heart-beats: "
    "a stall of 150 ms ends the session",
    "test_threads_read_role": "100 ms heart-beats both ways",
    "test_threads_pump": "100 ms heart-beats both ways",
    "test_plain_socket_example::test_plain_socket_client_against_selectors_server_with_"
    "heartbeats": "50 ms heart-beats",
    "test_spark_streams_exactly_once": "kills the Spark driver and restarts the query, "
    "within time-outs",
    "test_spark_streams_sink_exactly_once": "Spark task retries and speculative attempts",
    "test_spark_streams_broker_restart": "stops a RabbitMQ of its own for seconds under a "
    "running query and a running write",
    "test_spark_queue_broker_restart::test_a_streaming_query_from_a_queue_to_a_queue_rides_"
    "out_a_restart": "stops its broker for 3 s under a running streaming query, within time-outs",
    "test_scripts::test_apt_get_sh_waits_for_a_held_lock_then_succeeds": "holds the "
    "machine's package locks",
    "test_browser_stompjs": "headless Chromium with 500 ms heart-beats; alone, and with "
    "-rA, so that CI's log shows each broker's roundtrip and the Origin refusal",
    "test_browser_asgi": "headless Chromium with 500 ms heart-beats, as test_browser_stompjs",
    "test_asgi_uvicorn::test_the_checker_finds_no_failed_case_over_ws": "the conformance "
    "checker's hundreds of connections, each within a time-out, as test_checker",
}

#: The lane of each serial test in scripts/test.sh's serial phase, by module or by test
#: (a test's own entry wins over its module's); a test named nowhere here is "shared".
#: "first" (marked ``serial_first``: tests that stop, freeze or flood the shared brokers)
#: runs before every job that uses them, beside the fuzzing and the docs;
#: "shared" (the shared brokers, which it leaves as they were) and "own" (brokers and
#: processes it starts itself, none shared; marked ``serial_own``) run beside the last
#: jobs, with time-outs of seconds of margin, one lane's Spark tests at a time;
#: "alone" (timers of 500 ms or less, marked ``serial_alone``) runs once every other
#: test has ended: each run's pass at once, with nothing else beside them.
SERIAL_LANE: dict[str, str] = {
    "test_interop_brokers::test_fault_frozen_broker": "first",
    "test_interop_brokers::test_fault_broker_restart_mid_stream": "first",
    "test_chaos_rabbitmq": "first",
    "test_chaos_processes": "own",
    "test_spark_streams_broker_restart": "own",
    "test_spark_queue_broker_restart::test_a_streaming_query_from_a_queue_to_a_queue_rides_"
    "out_a_restart": "own",
    "test_adapters::test_heartbeats_keep_an_idle_connection_alive": "alone",
    "test_threads_read_role": "alone",
    "test_threads_pump": "alone",
    "test_plain_socket_example::test_plain_socket_client_against_selectors_server_with_"
    "heartbeats": "alone",
    "test_browser_stompjs": "alone",
    "test_browser_asgi": "alone",
    "test_asgi_uvicorn::test_the_checker_finds_no_failed_case_over_ws": "own",
}


def serial_lane(module: str, name: str) -> str:
    """The lane of serial test ``name`` of ``module`` (see :data:`SERIAL_LANE`)."""
    return SERIAL_LANE.get(f"{module}::{name}", SERIAL_LANE.get(module, "shared"))


def pytest_report_header(config: pytest.Config) -> str:
    from timeouts import load_factor

    return f"load factor: {load_factor():g} (time bounds are scaled by it; see tests/timeouts.py)"


def _scale_timeout(config: pytest.Config, item: pytest.Item) -> None:
    """pytest-timeout's bound of ``item`` (its mark, or the ini's ``timeout``) times the
    load factor: each is what the test needs on an idle machine."""
    from timeouts import load_factor

    factor = load_factor()
    if factor == 1.0:
        return
    marker = item.get_closest_marker("timeout")
    others = {k: v for k, v in (marker.kwargs if marker else {}).items() if k != "timeout"}
    if marker is not None and marker.args:
        seconds = float(marker.args[0])
    elif marker is not None and "timeout" in marker.kwargs:
        seconds = float(marker.kwargs["timeout"])
    else:
        seconds = float(config.getini("timeout") or 0)
    if seconds > 0:
        item.add_marker(pytest.mark.timeout(seconds * factor, **others), append=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unsorted = set()
    misplaced = set()
    for item in items:
        _scale_timeout(config, item)
        module = item.path.stem
        layer = _LAYER_OF.get(module)
        if layer is None:
            unsorted.add(module)
        else:
            item.add_marker(layer)
        name = getattr(item, "originalname", item.name)
        if module in SERIAL or f"{module}::{name}" in SERIAL:
            item.add_marker("serial")
            lane = serial_lane(module, name)
            if lane != "shared":
                item.add_marker(f"serial_{lane}")
        elif item.get_closest_marker("serial"):
            # scripts/test.sh gives the serial passes only the modules SERIAL names.
            misplaced.add(f"{module}::{name}")
    if misplaced:
        raise pytest.UsageError(
            f"tests marked serial outside tests/conftest.py SERIAL: {sorted(misplaced)}"
        )
    if unsorted:
        raise pytest.UsageError(
            f"test modules with no layer in tests/conftest.py LAYERS: {sorted(unsorted)}"
        )
