"""Audit records on, the way production runs them: through ``logging`` with a handler, or a direct sink.

Three ways a tool call's audit record can go (``mode``):

* ``"off"`` - Python's default: the ``bailing_flask.audit`` logger is not
  enabled for ``INFO`` (an app that configures no logging), so the package
  builds no record;
* ``"nohandler"`` - the logger enabled for ``INFO`` but no handler anywhere:
  up to a05d73f the record was built and logged, and ``logging`` dropped it;
  since issue 22 the package sees that no handler would take it and builds
  nothing (the row shows what that look costs);
* ``"logging"`` - what ``docs/operating.rst`` tells users to do, and what
  production runs: a ``logging.FileHandler`` on a JSON-lines file, the
  formatter ``%(message)s`` (the message is the JSON), the logger at
  ``INFO`` with ``propagate = False``. The file is in the system temporary
  directory; the handler flushes after every record, as it does in
  production (one ``write`` per call);
* ``"sink"`` - the package's direct JSON-lines sink (no ``logging``), the
  same file place: the request queues the record, the sink's thread writes
  it. It does not exist on a05d73f: :func:`direct_sink_setup` says why the
  row is skipped there.

The logger is process-wide, so the in-process comparisons set it per block:
every case of a comparison is :func:`audited`: its
``prepare`` (untimed, before each block) puts the logger in the state that
case needs and empties the file. Each audited case is checked before timing:
one call writes exactly one line, a JSON object with every field of
:data:`bailing_flask.audit.AUDIT_FIELDS` (the sink is flushed first: its
thread writes the line).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from typing import Any

from bailing_flask.audit import AUDIT_FIELDS, AUDIT_LOGGER

MODES = ("off", "nohandler", "logging", "sink")
#: The class and the setting the direct sink is assumed to come as (see :func:`direct_sink_setup`).
SINK_CLASS = "JsonLinesSink"
SINK_SETTING = "BAILING_AUDIT_SINK"
#: How the table prints the row while the sink does not exist.
NO_SINK = "no direct sink in this version"

_logger = logging.getLogger(AUDIT_LOGGER)


def direct_sink_setup(path: str) -> tuple[dict[str, Any] | None, str]:
    """The ``app.config`` entries that send audit records to ``path`` through the direct sink.

    Returns ``(config, "")``, or ``(None, why)`` when this version of the
    package has no direct sink. The assumed shape - to be agreed with the
    core rebuild, and the one place to change if it differs:
    ``bailing_flask.audit.JsonLinesSink(path)`` (appends one JSON object per
    line, the same fields as the logger's message), installed with the
    setting ``BAILING_AUDIT_SINK`` set to the sink before ``Bailing(app)``:
    the shape issue 22 built.
    """
    import bailing_flask.audit as audit
    from bailing_flask.settings import DEFAULTS

    sink_class = getattr(audit, SINK_CLASS, None)
    if sink_class is None:
        return None, NO_SINK
    if SINK_SETTING not in DEFAULTS:
        return None, (f"bailing_flask.audit.{SINK_CLASS} exists but there is no {SINK_SETTING} "
                      "setting: adapt benchmarks/_audit.py:direct_sink_setup")
    return {SINK_SETTING: sink_class(path)}, ""


class AuditFile:
    """A JSON-lines file in the system temporary directory, removed by :meth:`close`."""

    def __init__(self, label: str) -> None:
        fd, self.path = tempfile.mkstemp(prefix=f"bailing-bench-audit-{label}-", suffix=".jsonl")
        os.close(fd)

    def empty(self) -> None:
        os.truncate(self.path, 0)  # the writers append (O_APPEND): the next line starts at 0

    def lines(self) -> list[str]:
        with open(self.path, encoding="utf-8") as fh:
            return fh.read().splitlines()

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


class LoggingAudit:
    """The logger configured as the docs show, on an :class:`AuditFile`; switched per block."""

    def __init__(self, file: AuditFile) -> None:
        self.file = file
        self.handler = logging.FileHandler(file.path, encoding="utf-8")
        self.handler.setFormatter(logging.Formatter("%(message)s"))
        self.saved = (_logger.level, _logger.propagate, list(_logger.handlers))

    def set(self, mode: str) -> None:
        """Put the ``bailing_flask.audit`` logger in the state ``mode`` needs."""
        if mode not in MODES:
            raise ValueError(mode)
        for handler in list(_logger.handlers):
            _logger.removeHandler(handler)
        if mode == "logging":
            _logger.addHandler(self.handler)
            _logger.propagate = False
            _logger.setLevel(logging.INFO)
        elif mode == "nohandler":
            _logger.propagate = True  # up to the root logger, which has no handler either
            _logger.setLevel(logging.INFO)
        else:  # off, sink: Python's default, nothing enabled for INFO
            _logger.propagate = True
            _logger.setLevel(logging.NOTSET)
        if mode in ("off", "sink") and _logger.isEnabledFor(logging.INFO):
            raise AssertionError("the bailing_flask.audit logger is enabled for INFO by this process's "
                                 "logging configuration: the 'audit off' rows would not be off")
        if mode == "nohandler" and logging.getLogger().handlers:
            raise AssertionError("the root logger has handlers: 'no handler' would not hold")

    def restore(self) -> None:
        level, propagate, handlers = self.saved
        for handler in list(_logger.handlers):
            _logger.removeHandler(handler)
        for handler in handlers:
            _logger.addHandler(handler)
        _logger.setLevel(level)
        _logger.propagate = propagate
        self.handler.close()


def audited(case: Any, audit: LoggingAudit, mode: str, file: AuditFile | None = None,
            flush: Callable[[], None] | None = None) -> Any:
    """``case`` with the audit logger put in ``mode``'s state before every block (untimed).

    The case keeps its own ``__call__`` (no extra frame inside the timing);
    its ``prepare`` hook is replaced by one that runs the case's own first,
    then sets the logger, has ``flush`` (the direct sink's) write what is
    queued, and empties ``file``.
    """
    if mode not in MODES:
        raise ValueError(mode)
    own = getattr(case, "prepare", None)

    def prepare(loops: int) -> None:
        if own is not None:
            own(loops)
        audit.set(mode)
        if flush is not None:  # what earlier blocks queued is written before the file is emptied
            flush()
        if file is not None:
            file.empty()

    case.prepare = prepare
    case.audit_mode = mode
    case.audit_file = file
    case.audit_flush = flush
    return case


def check_one_line(case: Any) -> dict[str, Any]:
    """One call of an :func:`audited` case writes exactly one complete record; returns it."""
    file: AuditFile | None = case.audit_file
    mode: str = case.audit_mode
    if file is None:
        raise ValueError("the case writes no file")
    case.prepare(1)
    case()
    if case.audit_flush is not None:  # the direct sink: its thread writes the line
        case.audit_flush()
    lines = file.lines()
    if len(lines) != 1:
        raise AssertionError(f"audit {mode}: one call wrote {len(lines)} lines to the file, not 1")
    record: dict[str, Any] = json.loads(lines[0])
    missing = [f for f in AUDIT_FIELDS if f not in record]
    if missing or record.get("event") != "tool_call":
        raise AssertionError(f"audit {mode}: the record lacks {missing}: {lines[0][:300]}")
    return record
