"""Every public name - each ``__all__`` of the package and its public subpackages -
has an entry in the Sphinx documentation (docs/*.rst), under its own name or, for
a re-export, where the object is defined."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import re
import traceback
import types
import typing
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PUBLIC_MODULES = [
    "stomp_proto",
    "stomp_proto.asyncio",
    "stomp_proto.trio",
    "stomp_proto.threads",
    "stomp_proto.broker",
    "stomp_proto.websocket",
    # the conformance checker, a distribution of its own (stomp-check/)
    "stomp_check",
    "stomp_proto.asgi",
    # the Django Channels consumer, a distribution of its own (stomp-proto-channels/)
    "stomp_proto_channels",
    "stomp_proto.spark",
    # The connection classes first: their names there are the ones they are defined
    # under (stomp_proto.stomppy.Connection is an alias, documented by its class).
    "stomp_proto.stomppy.connect",
    "stomp_proto.stomppy.adapter.ws",
    "stomp_proto.stomppy.adapter.multicast",
    "stomp_proto.stomppy.cli",
    "stomp_proto.stomppy",
    "stomp_proto.stomppy.listener",
    "stomp_proto.stomppy.exception",
]
_DIRECTIVE = re.compile(
    r"^\.\. (?:py:)?(auto)?(module|currentmodule|class|function|data|exception|attribute|method)"
    r"::\s*([\w.]+)",
    re.MULTILINE,
)


def documented_names() -> set[str]:
    """Fully qualified names that some directive documents."""
    names: set[str] = set()
    for path in sorted(DOCS.glob("*.rst")):
        text = path.read_text(encoding="utf-8")
        current = ""
        for match in _DIRECTIVE.finditer(text):
            auto, kind, target = match.groups()
            if kind in ("module", "currentmodule"):
                current = target
                if auto:  # automodule :members: documents its __all__
                    options = text[match.end() :].split("\n\n")[0]
                    listed = re.search(r":members:(.*)", options)
                    if listed is not None:
                        members = [m.strip() for m in listed.group(1).split(",") if m.strip()]
                        if not members:  # all of them
                            members = list(importlib.import_module(target).__all__)
                        names.update(f"{target}.{m}" for m in members)
                continue
            qualified = (
                target
                if "." in target and target.startswith("stomp_proto")
                else (f"{current}.{target}" if current else target)
            )
            names.add(qualified)
    return names


def resolve(qualified: str) -> object:
    """The object a dotted name stands for (``None`` if there is none)."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute, None)
        return obj
    return None


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_documented(module_name: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # trio and pyspark are optional extras
        pytest.skip(f"{module_name}: {exc}")
    documented = documented_names()
    # A re-export (stomp_proto.asyncio.ConnectionLost) is documented where it is defined.
    documented_objects = {id(resolve(name)) for name in documented}
    missing = [
        name
        for name in module.__all__
        if f"{module_name}.{name}" not in documented
        and id(getattr(module, name)) not in documented_objects
    ]
    assert not missing, f"{module_name}: not in docs/*.rst: {missing}"


def _importable_public_modules() -> list[tuple[str, types.ModuleType]]:
    """(name, module) of each public module that imports here (Spark's needs pyspark)."""
    found = []
    for module_name in PUBLIC_MODULES:
        try:
            found.append((module_name, importlib.import_module(module_name)))
        except ImportError:
            continue
    return found


def _public_objects() -> dict[int, str]:
    """id -> public name of everything the public modules export."""
    public: dict[int, str] = {}
    for module_name, module in _importable_public_modules():
        for name in module.__all__:
            public.setdefault(id(getattr(module, name)), f"{module_name}.{name}")
    return public


def _signatures(obj: object) -> list[tuple[str, object, dict[str, object]]]:
    """(where, annotations, the globals they resolve in) of ``obj`` and its public methods."""
    found = []
    members = [(getattr(obj, "__qualname__", repr(obj)), obj)]
    if isinstance(obj, type):
        # Inherited too: ClientConnection.send is _Connection's.
        members += [
            (f"{obj.__qualname__}.{name}", member)
            for klass in obj.__mro__
            if klass.__module__.startswith("stomp_proto")
            for name, member in vars(klass).items()
            if not name.startswith("_") or name == "__init__"
        ]
    for where, member in members:
        function = member.fget if isinstance(member, property) else member
        function = getattr(function, "__func__", function)
        annotations = getattr(function, "__annotations__", None)
        if isinstance(annotations, dict) and annotations:
            module = importlib.import_module(getattr(function, "__module__", "stomp_proto"))
            found.append((where, annotations, vars(module)))
    return found


#: Signatures users do not call, so their types may stay private.
NOT_CALLED_BY_USERS = {
    # Built by connect(); the constructor takes the adapter's internals.
    "AsyncClient.__init__",
    "Client.__init__",
    # client.unsolicited, made by the client with its backend.
    "AsyncUnsolicited.__init__",
    # pyspark's DataSource API: Spark calls these and uses what they return.
    "StompDataSource.reader",
    "StompDataSource.writer",
    "StompDataSource.simpleStreamReader",
    "StompCaptureDataSource.reader",
    "StompStreamsDataSource.reader",
    "StompStreamsDataSource.streamReader",
    "StompStreamsDataSource.writer",
}


def test_every_type_in_a_public_signature_is_public() -> None:
    """A user must be able to import (and read about) every type an API names,
    ``Headers`` for one."""
    public = _public_objects()
    private: list[str] = []
    for _, module in _importable_public_modules():
        for name in module.__all__:
            for where, hints, namespace in _signatures(getattr(module, name)):
                if where in NOT_CALLED_BY_USERS:
                    continue
                for annotation in hints.values():
                    for word in re.findall(r"[A-Za-z_]\w*", str(annotation)):
                        target = namespace.get(word)
                        defined_here = getattr(target, "__module__", "") or ""
                        # A class of ours, or an alias (Headers) one of our modules made.
                        ours = defined_here.startswith("stomp_proto") or (
                            target is not None
                            and not isinstance(target, (type, types.ModuleType))
                            and getattr(typing, word, None) is not target
                        )
                        if ours and id(target) not in public and not word.startswith("_"):
                            private.append(f"{where}: {word}")
    assert not private, sorted(set(private))


def _public_classes() -> list[tuple[str, type]]:
    found = []
    for module_name, module in _importable_public_modules():
        for name in module.__all__:
            try:
                obj = getattr(module, name)
            except ImportError:  # the Spark classes without pyspark
                continue
            if isinstance(obj, type):
                found.append((f"{module_name}.{name}", obj))
    return found


def _keeps_its_module(cls: type) -> bool:
    """Dataclasses, NamedTuples and TypedDicts keep the module that defines them:
    ``typing.get_type_hints`` resolves their string annotations there (and those of
    their bases: FrameEvent's ``ClassVar``)."""
    return (
        dataclasses.is_dataclass(cls)
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
        or typing.is_typeddict(cls)
        or (
            bool(vars(cls).get("__annotations__"))
            and any(dataclasses.is_dataclass(sub) for sub in cls.__subclasses__())
        )
        or cls.__module__.startswith("stomp_proto.spark")
    )


def test_public_classes_carry_a_public_module_name() -> None:
    """``stomp_proto.ConnectionLost``, not ``stomp_proto._client._core.ConnectionLost``."""
    wrong = []
    for qualified, cls in _public_classes():
        if _keeps_its_module(cls):
            continue
        home = importlib.import_module(cls.__module__)
        if cls.__module__.split(".")[-1].startswith("_") or getattr(home, cls.__name__) is not cls:
            wrong.append(f"{qualified}: {cls.__module__}")
    assert not wrong


def test_errors_print_their_public_names() -> None:
    import stomp_proto

    try:
        raise stomp_proto.HeartBeatLost("silent")
    except stomp_proto.ConnectionLost as exc:
        shown = "".join(traceback.format_exception(exc))
    assert shown.endswith("stomp_proto.HeartBeatLost: silent\n")
    assert repr(stomp_proto.LocalProtocolError) == "<class 'stomp_proto.LocalProtocolError'>"
    assert repr(stomp_proto.ErrorKind.CLOSED).startswith("<ErrorKind.CLOSED")
    # Pickled by reference: the public name must lead back to the class.
    for error in (stomp_proto.ConnectionLost("x"), stomp_proto.HeartBeatLost("y")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and copy.args == error.args
    assert pickle.loads(pickle.dumps(stomp_proto.ConnectionState.CLOSED)) is (
        stomp_proto.ConnectionState.CLOSED
    )


def test_type_hints_of_public_classes_resolve() -> None:
    """What ``get_type_hints`` (cattrs, pydantic ...) needs still works after the renaming."""
    for _qualified, cls in _public_classes():
        if cls.__module__.startswith("stomp_proto.spark"):
            continue  # pyspark's own base classes
        typing.get_type_hints(cls)
