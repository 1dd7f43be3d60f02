"""The exercise's ``reads`` check: a view that reads query or body keys its catalog does not declare.

A view that reads ``request.args`` by hand (or through a marshmallow schema,
a form library, ``request.get_json()``) publishes no parameter for what it
reads: the catalog is clean, and every argument the hub sends for it is
refused ``422 unknown_parameter``. While the views of read-only tools run
for ``--subject``, the request object the app uses records which keys the
declared view stack reads after the gate admitted the call (``get``,
``[]``, ``getlist``, ``in``; iteration, ``keys()``, ``items()``,
``to_dict()`` read the whole mapping) from the query string
(``request.args``) and the body (``request.form``, ``request.get_json()``,
``request.json``). A key read that the tool's catalog entry does not
declare where it was read is reported; reading the whole mapping is
reported where the catalog declares no parameter there (the hub then sends
none). The gate's own reading of the arguments is not counted.

The recording request class stands in for the app's own only for the
duration of the run, and records nothing outside the exercise's ``subject``
requests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from flask import Flask
from werkzeug.datastructures import ImmutableMultiDict

from bailing_flask._pipeline.gate import EXERCISE_KEY, GATE_KEY, ExerciseProbe
from bailing_flask.lint import CompiledTool

__all__ = ["Reads", "recording_reads", "reads_check"]

_WHERE = {"query": "request.args", "body": "the request body"}
_DECLARE = {"query": "declare it with query= (a model) or a Param(..., location='query')",
            "body": "declare it in the tool's body= model"}


@dataclass
class Reads:
    """What one request's view stack read: ``location -> keys`` and the locations read whole."""

    keys: dict[str, list[str]] = field(default_factory=dict)
    whole: dict[str, str] = field(default_factory=dict)

    def key(self, location: str, key: Any) -> None:
        if isinstance(key, str) and key not in self.keys.setdefault(location, []):
            self.keys[location].append(key)

    def all(self, location: str, how: str) -> None:
        self.whole.setdefault(location, how)


def _sink(environ: dict[str, Any], reads: dict[int, Reads]) -> Reads | None:
    """Where a read is recorded: only in a ``subject`` request, after the gate admitted it."""
    probe = environ.get(EXERCISE_KEY)
    if not isinstance(probe, ExerciseProbe) or probe.mode != "subject" or environ.get(GATE_KEY) is None:
        return None
    return reads.setdefault(id(probe), Reads())


class _RecordingMultiDict(ImmutableMultiDict[str, Any]):
    """``request.args``/``request.form`` that notes which keys the view reads."""

    _environ: dict[str, Any]
    _reads: dict[int, Reads]
    _location: str

    def _key(self, key: Any) -> None:
        sink = _sink(self._environ, self._reads)
        if sink is not None:
            sink.key(self._location, key)

    def _all(self, how: str) -> None:
        sink = _sink(self._environ, self._reads)
        if sink is not None:
            sink.all(self._location, how)

    def __getitem__(self, key: Any) -> Any:
        self._key(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None, type: Any = None) -> Any:  # type: ignore[override]
        self._key(key)
        return super().get(key, default, type)

    def getlist(self, key: Any, type: Any = None) -> Any:
        self._key(key)
        return super().getlist(key, type)

    def __contains__(self, key: object) -> bool:
        self._key(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._all("iterates it")
        return super().__iter__()

    def keys(self) -> Any:
        self._all("keys()")
        return super().keys()

    def items(self, multi: bool = False) -> Any:
        self._all("items()")
        return super().items(multi)

    def values(self) -> Any:
        self._all("values()")
        return super().values()

    def lists(self) -> Any:
        self._all("lists()")
        return super().lists()

    def to_dict(self, flat: bool = True) -> Any:
        self._all("to_dict()")
        return super().to_dict(flat) if flat else super().to_dict(False)


class _RecordingDict(dict[str, Any]):
    """A JSON object body that notes which keys the view reads."""

    _environ: dict[str, Any]
    _reads: dict[int, Reads]

    def _key(self, key: Any) -> None:
        sink = _sink(self._environ, self._reads)
        if sink is not None:
            sink.key("body", key)

    def _all(self, how: str) -> None:
        sink = _sink(self._environ, self._reads)
        if sink is not None:
            sink.all("body", how)

    def __getitem__(self, key: str) -> Any:
        self._key(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._key(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._key(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._all("iterates it")
        return super().__iter__()

    def keys(self) -> Any:
        self._all("keys()")
        return super().keys()

    def items(self) -> Any:
        self._all("items()")
        return super().items()

    def values(self) -> Any:
        self._all("values()")
        return super().values()


def _recording(original: Any, environ: dict[str, Any], reads: dict[int, Reads], location: str) -> Any:
    if isinstance(original, dict) and not isinstance(original, ImmutableMultiDict):
        wrapped: Any = _RecordingDict(original)
    elif isinstance(original, ImmutableMultiDict):
        wrapped = _RecordingMultiDict(original)
        wrapped._location = location
    else:
        return original
    wrapped._environ, wrapped._reads = environ, reads
    return wrapped


class _ReadsRequest:
    """Mixed in before the app's own request class, for the run."""

    _bailing_reads: dict[int, Reads]
    environ: dict[str, Any]

    @property
    def args(self) -> Any:
        cached = self.__dict__.get("_bailing_args")
        if cached is None:
            cached = self.__dict__["_bailing_args"] = _recording(
                super().args, self.environ, self._bailing_reads, "query")  # type: ignore[misc]
        return cached

    @property
    def form(self) -> Any:
        cached = self.__dict__.get("_bailing_form")
        if cached is None:
            cached = self.__dict__["_bailing_form"] = _recording(
                super().form, self.environ, self._bailing_reads, "body")  # type: ignore[misc]
        return cached

    def get_json(self, *args: Any, **kwargs: Any) -> Any:
        value = super().get_json(*args, **kwargs)  # type: ignore[misc]
        return _recording(value, self.environ, self._bailing_reads, "body")


@contextlib.contextmanager
def recording_reads(app: Flask, reads: dict[int, Reads]) -> Iterator[None]:
    """For the run: the app's request class, recording what the views read (into ``reads``)."""
    original = app.request_class
    app.request_class = type(original.__name__, (_ReadsRequest, original),
                             {"_bailing_reads": reads, "__module__": original.__module__})
    try:
        yield
    finally:
        app.request_class = original


def _problems(tool: CompiledTool, seen: Reads) -> list[tuple[str, str]]:
    problems = []
    for location, keys in seen.keys.items():
        for key in keys:
            declared = tool.param_in.get(key)
            if declared == location:
                continue
            also = f" (the catalog has it in the {declared})" if declared else ""
            problems.append((
                f"{tool.method} {tool.path} reads {location} key {key!r} the catalog does not declare{also}: "
                "the hub's argument would be refused 422 unknown_parameter", _DECLARE[location]))
    for location, how in seen.whole.items():
        if location not in tool.param_in.values():
            problems.append((
                f"{tool.method} {tool.path} reads undeclared {location} input ({_WHERE[location]}: {how}) "
                f"and the catalog declares no {location} parameter: the hub sends none, and any the model "
                "gives is refused 422 unknown_parameter", _DECLARE[location].replace("it", "what it reads", 1)))
    return problems


class _Recorder(Protocol):
    """What the check needs of the running exercise (without importing it: it is above)."""

    reads: dict[int, Reads]

    def add(self, *args: Any, **kwargs: Any) -> None: ...


def reads_check(ex: _Recorder, target: str, tool: CompiledTool, probe: ExerciseProbe) -> None:
    """After a ``subject`` request whose view ran: report what it read that the catalog lacks."""
    seen = ex.reads.pop(id(probe), None)
    if seen is None or not probe.reached_view:
        return
    problems = _problems(tool, seen)
    for summary, fix in problems:
        ex.add(target, "reads", "warn", summary, None, fix)
    if not problems and (seen.keys or seen.whole):
        read = "; ".join(f"{location}: {', '.join(keys)}" for location, keys in seen.keys.items() if keys)
        ex.add(target, "reads", "pass", f"the view reads only declared input ({read or 'whole mappings'})")
