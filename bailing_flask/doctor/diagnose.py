"""Name the layer that rewrote a refused request.

When a correctly signed request gets ``401``, the doctor retries it with a
few corrected signatures (another path prefix, the server's own clock); the
variant that succeeds names the cause. These diagnostic requests are marked
as such; the hub itself never sends them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from bailing_flask.lint import CompiledTool
from bailing_flask.wire.signing import sign_tool_call
from bailing_flask.doctor.classify import _server_time
from bailing_flask.doctor.constants import CLOCK_TOLERANCE, SPEC_MAX_BYTES, WELL_KNOWN_CATALOG, WINDOW_SECONDS
from bailing_flask.doctor.report import Check
from bailing_flask.doctor.session import _Session
from bailing_flask.doctor.transport import _Exchange, _parse_url


def _prefix_of(path: str, suffix: str) -> str | None:
    """``path`` minus ``suffix`` at its end, if it ends with it."""
    return path[: -len(suffix)] if suffix and path.endswith(suffix) else None


def _strip_variants(path: str, limit: int = 3) -> list[str]:
    """``path`` without its first 1, 2, ... segments (what a prefix-stripping proxy forwards)."""
    variants = []
    rest = path
    for _ in range(limit):
        cut = rest.find("/", 1)
        if cut <= 0:
            break
        rest = rest[cut:]
        variants.append(rest)
    return variants


def _unique(values: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def _describe_401(reason: str | None, exchange: _Exchange, *, catalog: bool) -> str:
    """Explain a 401 refusal of a correctly signed request."""
    what = "the signed catalog fetch" if catalog else "the signed request"
    authenticate = exchange.header("www-authenticate") or ""
    if reason == "timestamp_out_of_window":
        return (f"The server refused {what} with timestamp_out_of_window: its clock differs from the "
                f"hub's by {WINDOW_SECONDS} s or more (see the clock check).")
    if reason == "bad_signature":
        signed = "the full path of spec_url, prefix included" if catalog else (
            "the tool path WITHOUT the base_url prefix")
        return (f"The server refused {what} with bad_signature: it computed a different signature. "
                f"Either the secret differs from the hub's provider secret, or the server verified "
                f"another path than the hub signed ({signed}; a proxy that strips or adds a prefix, "
                f"or re-encodes the URL, causes this: traps T3, T5).")
    if reason == "missing_signature":
        extra = (" With bailing_flask it also means that the app did not recognise the request as its "
                 "catalog (the path it saw differs from BAILING_PATH_PREFIX + /tools.json under "
                 "SCRIPT_NAME, e.g. a middleware rewrote PATH_INFO without setting SCRIPT_NAME)."
                 if catalog else "")
        return (f"The server says {what} carried no valid X-Bailing-Signature: something between the "
                f"hub and the app may drop X-Bailing-* headers.{extra}")
    if reason in ("malformed_signature", "malformed_timestamp"):
        return (f"The server says the X-Bailing headers of {what} are malformed ({reason}): a proxy "
                f"alters or duplicates them.")
    if reason is None and authenticate and not authenticate.lower().startswith("bailing"):
        return (f"{what[0].upper() + what[1:]} got 401 with WWW-Authenticate: {authenticate}: an "
                f"authentication layer in front of the app refuses it; the hub can only send "
                f"X-Bailing-* headers.")
    if reason is None:
        return (f"The server refused {what} with 401 without saying why (no reason in the body); "
                f"it was probably not refused by bailing_flask.")
    return f"The server refused {what} with 401 ({reason})."


@dataclass
class _Found:
    """What one diagnostic variant showed."""

    kind: Literal["prefix", "clock"]
    signed_path: str = ""
    offset: float = 0.0


class _Diagnosis(_Session):
    """The 401 diagnosis of the catalog fetch and of a tool call."""

    def _diagnose_catalog_401(self, primary: _Exchange, reason: str | None) -> _Exchange | None:
        signed_path = self.catalog.target
        lines = [_describe_401(reason, primary, catalog=True)]
        found: _Found | None = None
        rescued: _Exchange | None = None
        url = self.catalog.href
        server_now = _server_time(primary)
        if server_now is not None and reason in ("timestamp_out_of_window", None):
            skew = server_now - (primary.sent_at + primary.received_at) / 2
            if abs(skew) >= CLOCK_TOLERANCE:
                ts = str(math.floor(self.clock() + self.offset + skew))
                headers = {"x-bailing-timestamp": ts,
                           "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path)}
                retry = self.http.send("diagnostic_server_clock", "GET", url, headers, limit=SPEC_MAX_BYTES)
                if retry.ok:
                    found, rescued = _Found("clock", offset=skew), retry
                    self.offset = skew
        if found is None and reason in ("bad_signature", None):
            candidates = _strip_variants(signed_path.split("?")[0])
            query = signed_path[len(signed_path.split("?")[0]):]
            candidates = [c + query for c in candidates]
            if self.base_prefix and not signed_path.startswith(self.base_prefix + "/"):
                candidates.append(self.base_prefix + signed_path)
            for candidate in _unique(candidates)[:4]:
                ts = self.now()
                headers = {"x-bailing-timestamp": ts,
                           "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", candidate)}
                retry = self.http.send("diagnostic_signed_path", "GET", url, headers, limit=SPEC_MAX_BYTES)
                if retry.ok:
                    found, rescued = _Found("prefix", signed_path=candidate), retry
                    break
        fix: str
        if found is not None and found.kind == "clock":
            lines.append(f"Confirmed: signed with the server's own clock ({found.offset:+.0f} s from this "
                         "machine) the same request succeeds.")
            fix = ("Synchronise the server's clock with NTP (the hub and the server must agree within "
                   f"{WINDOW_SECONDS} s; aim for < 1 s).")
        elif found is not None:
            path = signed_path.split("?")[0]
            if len(found.signed_path.split("?")[0]) < len(path):
                stripped = path[: len(path) - len(found.signed_path.split("?")[0])]
                lines.append(
                    f"Confirmed: the server accepts the catalog signed for {found.signed_path!r} instead "
                    f"of {signed_path!r}. A reverse proxy strips the prefix {stripped!r} before the app, "
                    "so the app verifies a shorter path than the hub signs (trap T3: the catalog "
                    "signature covers the full public path)."
                )
                fix = (f"Tell the app its public prefix: BAILING_PUBLIC_PREFIX = {stripped!r} (or "
                       f"have the proxy send X-Forwarded-Prefix: {stripped} and wrap the app in "
                       "werkzeug's ProxyFix(x_prefix=1)); or stop the proxy from stripping it.")
            else:
                added = found.signed_path[: len(found.signed_path) - len(signed_path)]
                lines.append(
                    f"Confirmed: the server accepts the catalog signed for {found.signed_path!r} instead "
                    f"of {signed_path!r}: something adds the prefix {added!r} between the hub and the app."
                )
                fix = (f"Use the public URL the app expects as spec_url (with {added!r}), or stop the "
                       "proxy from rewriting the path.")
        elif reason == "bad_signature":
            lines.append("No prefix variant of the path was accepted either, so the secret is the most "
                         "likely cause.")
            fix = ("Copy the provider secret from the hub console (tool source -> reveal secret) into "
                   "BAILING_SECRETS exactly (no quotes or whitespace); if you rotated it, list both during "
                   "the switch. If the secret is right, look for a proxy that rewrites the path or query.")
        elif reason == "timestamp_out_of_window":
            fix = "Synchronise the server's clock with NTP."
        elif reason == "missing_signature":
            fix = ("Configure the proxy/gateway to forward X-Bailing-* headers unchanged; with bailing_flask, "
                   f"make spec_url's path exactly the public prefix + BAILING_PATH_PREFIX + /tools.json "
                   f"(default {WELL_KNOWN_CATALOG})")
            fix += (" without the trailing slash." if signed_path.split("?")[0].endswith("/") else ".")
        else:
            fix = ("Make sure the request reaches the app unchanged and that nothing in front of it "
                   "requires its own authentication.")
        why = f" ({reason})" if reason else ""
        self.add(Check(
            "catalog.access", "fail",
            f"inconclusive: signed 401{why}; the hub refuses the refresh and keeps its old catalog",
            detail="\n".join(lines), fix=fix,
        ))
        if rescued is not None:
            self.state.document_from_variant = (
                "the catalog below was read with a corrected signature (the hub cannot read it)"
            )
        return rescued

    def _prefix_hint(self, path: str) -> str | None:
        catalog_prefix = _prefix_of(self.catalog.target.split("?")[0], WELL_KNOWN_CATALOG)
        if catalog_prefix is not None and catalog_prefix.rstrip("/") != self.base_prefix:
            suggested = self.base.origin + catalog_prefix.rstrip("/")
            served = f"under {catalog_prefix!r}" if catalog_prefix else "at the root"
            has = f"the prefix {self.base_prefix!r}" if self.base_prefix else "no path prefix"
            return (f"The catalog is served {served} but base_url has {has}: the hub requests base_url + "
                    f"{path}. Try base_url {suggested}.")
        return (f"Check base_url: the hub requests base_url + the catalog path ({self.base_url}{path}); "
                "a missing or extra prefix (e.g. /api) answers 404.")

    def _diagnose_tool_401(
        self, tool: CompiledTool, final: _Exchange, reason: str | None, line: str,
        request: Callable[[str, str], list[_Exchange]],
    ) -> None:
        lines = [line, _describe_401(reason, final, catalog=False)]
        fix = None
        if reason in ("bad_signature", None):
            candidates = []
            if self.base_prefix:
                candidates.append(self.base_prefix + tool.path)
                if tool.path.startswith(self.base_prefix + "/"):
                    candidates.append(tool.path[len(self.base_prefix):])
            catalog_prefix = _prefix_of(self.catalog.target.split("?")[0], WELL_KNOWN_CATALOG)
            if catalog_prefix:
                candidates.append(catalog_prefix.rstrip("/") + tool.path)
            wire = _parse_url(self.base_url + tool.path).target
            wire_relative = wire[len(self.base_prefix):] if wire.startswith(self.base_prefix) else None
            if wire_relative:
                candidates.append(wire_relative)
            for candidate in [c for c in _unique(candidates) if c != tool.path][:3]:
                retry = request(candidate, "diagnostic_signed_path")[-1]
                if retry.status is not None and retry.status != 401 and retry.status < 500:
                    if len(candidate) > len(tool.path):
                        extra = candidate[: len(candidate) - len(tool.path)]
                        lines.append(
                            f"Confirmed: the server accepts the call signed for {candidate!r}: it puts the "
                            f"prefix {extra!r} into the signed path, but the hub signs the tool path "
                            f"{tool.path!r} WITHOUT the base_url prefix (trap T3).")
                        fix = ("Verify tool calls against the path relative to base_url: mount the app "
                               f"so SCRIPT_NAME is {extra!r} (bailing_flask strips it), or, behind a proxy "
                               "that forwards the full path, strip the prefix before the app.")
                    elif candidate == wire_relative:
                        lines.append(
                            f"Confirmed: the server verifies the path as it arrived ({candidate!r}), but the "
                            f"hub signs the catalog path {tool.path!r} before its URL parser re-encodes it "
                            "(trap T4).")
                        fix = ("Use only unreserved ASCII characters in catalog paths (see the lint), or "
                               "verify against the spec template as bailing_flask does.")
                    else:
                        lines.append(
                            f"Confirmed: the server accepts the call signed for {candidate!r} instead of "
                            f"{tool.path!r}: a proxy changes the path between the hub and the app (trap T5).")
                        fix = "Stop the proxy from rewriting the path, or correct base_url."
                    break
            else:
                if reason == "bad_signature" and self.state.access and self.state.access.status == "protected":
                    lines.append("The catalog fetch with the same secret succeeded, so the secret is right: "
                                 "the server verifies another path, subject or job than the hub signs.")
                    fix = (f"Verify against the path relative to base_url ({tool.path}), the raw query, "
                           "X-Bailing-On-Behalf-Of and X-Bailing-Job-Id; make sure no proxy rewrites the "
                           "path (traps T3, T5).")
                else:
                    fix = ("Check the secret, and that no proxy strips or adds a path prefix "
                           "(the tool signature excludes the base_url prefix).")
        elif reason == "timestamp_out_of_window":
            fix = "Synchronise the server's clock with NTP."
        elif reason == "missing_signature":
            fix = "Configure the proxy/gateway to forward X-Bailing-* headers unchanged."
        self.add(Check(
            "tool_call", "fail",
            f"tool {tool.name} refused the signed call: 401" + (f" ({reason})" if reason else ""),
            detail="\n".join(lines), fix=fix,
        ))
