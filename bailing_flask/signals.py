"""Blinker signals, so apps can feed their own audit tables, metrics and pages.

The sender of every signal is the Flask app.

``tool_called``: sent after a tool view ran (``call``, ``response``,
``duration_ms``). ``tool_denied``: sent when a call is refused before the
view (``tool``, ``call`` or ``None``, ``reason``, ``status``).
``tool_failed``: sent when the view raised (``tool``, ``call``,
``exception``, ``status``, ``duration_ms``); the exception propagates to
Flask as before. ``signature_refused``: sent when a signed request was
refused before Flask routed it (a bad signature, a stale timestamp, a body
too large) or a hub callback's signature was refused (``kind`` is
``"tool"`` or ``"callback"``, ``reason``, ``status``, ``method``, ``path``,
``tool`` or ``None``). ``audit_record``: sent with every audit record
(``record``, a JSON-ready ``dict``), whichever of the above produced it;
it is the one signal to connect for an activity page or for metrics.
``callback_received``: sent after a callback handler ran (``kind``,
``payload``).

Nothing is built for a signal nobody listens to.
"""

from __future__ import annotations

from blinker import Namespace

__all__ = [
    "tool_called",
    "tool_denied",
    "tool_failed",
    "signature_refused",
    "audit_record",
    "callback_received",
]

_signals = Namespace()

tool_called = _signals.signal("bailing-tool-called")
tool_denied = _signals.signal("bailing-tool-denied")
tool_failed = _signals.signal("bailing-tool-failed")
signature_refused = _signals.signal("bailing-signature-refused")
audit_record = _signals.signal("bailing-audit-record")
callback_received = _signals.signal("bailing-callback-received")
