"""Blinker signals, so apps can feed their own audit tables.

``tool_called``: sent after a tool view ran (``call``, ``response``,
``duration_ms``). ``tool_denied``: sent when a call is refused before the
view (``tool``, ``call`` or ``None``, ``reason``, ``status``). The sender is
the Flask app.
"""

from __future__ import annotations

from blinker import Namespace

__all__ = ["tool_called", "tool_denied", "callback_received"]

_signals = Namespace()

tool_called = _signals.signal("bailing-tool-called")
tool_denied = _signals.signal("bailing-tool-denied")
callback_received = _signals.signal("bailing-callback-received")
