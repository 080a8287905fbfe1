"""The "Writing an adapter" example runs: a real socket, both halves of the session."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
from pathlib import Path
from types import ModuleType

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_plain_socket_client_against_plain_socket_server() -> None:
    server = load("plain_socket_server")
    client = load("plain_socket_client")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        thread = threading.Thread(target=server.serve_one, args=(listener,), daemon=True)
        thread.start()
        bodies = client.main("127.0.0.1", port)
        thread.join(timeout=10)
    assert bodies == [b"hello 0", b"hello 1", b"hello 2"]
    assert not thread.is_alive()
