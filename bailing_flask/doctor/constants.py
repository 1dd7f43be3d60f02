"""What the hub sends and expects, as the doctor reproduces it."""

from __future__ import annotations

WELL_KNOWN_CATALOG = "/.well-known/bailing/tools.json"
SPEC_MAX_BYTES = 5 * 1024 * 1024
WINDOW_SECONDS = 300
#: Clock differences up to this many seconds are normal (Date has 1 s resolution).
CLOCK_TOLERANCE = 5
PROBE_SUBJECT = "__bailing_authz_probe__:nobody"
PROBE_BODY = b'{"subject":"__bailing_authz_probe__:nobody","reason":"bailing-authz-probe","expect":"deny"}'
ZERO_SIGNATURE = "sha256=" + "0" * 64
#: The undeclared argument the write-tool check adds, so the gate refuses before authorization.
_DOCTOR_MARKER = "__bailing_doctor__"
_T8 = (
    "Trap T8: the hub follows redirects on tool calls and probes and re-sends the same "
    "X-Bailing-Signature for the new path, which the target cannot verify (301/302/303 also turn a "
    "POST into a body-less GET); on the catalog it never follows them and the refresh is "
    "inconclusive."
)
