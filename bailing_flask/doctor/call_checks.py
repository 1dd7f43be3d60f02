"""The checks that call the deployment: the authorization probe, the clock, a tool call, the
write tools, redirects."""

from __future__ import annotations

import uuid

from bailing_flask.wire.jsenc import js_trim as _js_trim
from bailing_flask.lint import CompiledTool, ProbeTarget, authz_probe_target, compile_tools
from bailing_flask.wire.signing import sign_tool_call
from bailing_flask.doctor.classify import (
    _KNOWN_REASONS,
    _SIGNATURE_REASONS,
    _cache_hits,
    _classify_probe,
    _reason_of,
    _server_time,
)
from bailing_flask.doctor.constants import (
    _DOCTOR_MARKER,
    _T8,
    CLOCK_TOLERANCE,
    PROBE_BODY,
    PROBE_SUBJECT,
    WINDOW_SECONDS,
    ZERO_SIGNATURE,
)
from bailing_flask.doctor.diagnose import _Diagnosis
from bailing_flask.doctor.report import Check, ProbeOutcome
from bailing_flask.doctor.transport import _Exchange


class _CallChecks(_Diagnosis):
    """Checks 5 to 9: what the hub sends to the deployment itself."""

    # -- 5. the authorization probe ------------------------------------------------------------

    def _tool(self, name: str) -> CompiledTool | None:
        assert self.state.document is not None
        return next((t for t in compile_tools(self.state.document) if t.name == name), None)

    def _probe_request(
        self, target: ProbeTarget, signature: str | None = None
    ) -> tuple[str, dict[str, str], bytes]:
        ts = self.now()
        if target.mode == "dedicated":
            body = PROBE_BODY if target.method == "POST" else b""
            scope = "__probe__.authz"
        else:
            body = b""
            tool = self._tool(target.name)
            scope = tool.scope if tool else ""
        headers = {
            "x-bailing-timestamp": ts,
            "x-bailing-signature": signature or sign_tool_call(
                self.secret, ts, target.method, target.path, body, PROBE_SUBJECT, "probe"),
            "x-bailing-job-id": "probe",
            "x-bailing-client": "__probe__",
            "x-bailing-on-behalf-of": PROBE_SUBJECT,
            "x-bailing-tool-scope": scope,
        }
        if target.mode == "dedicated":
            headers = {"content-type": "application/json", **headers}
        return self.base_url + target.path, headers, body

    def authz_probe(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("authz_probe", "no catalog: the hub needs one to choose the probe target")
            self.skip("authz_probe.verifies", "no probe target")
            return
        target = authz_probe_target(document)
        if target is None:
            self.state.probe = ProbeOutcome("skipped", reason="no dedicated probe and no parameter-less GET tool")
            self.add(Check(
                "authz_probe", "warn",
                "skipped by the hub: no x-bailing-authz-probe and no parameter-less GET tool",
                fix="Declare a dedicated probe endpoint (bailing_flask serves one below BAILING_PATH_PREFIX "
                    "and advertises it in the catalog).",
            ))
            self.skip("authz_probe.verifies", "no probe target")
            return
        timeout = min(self.timeout, 8.0)
        url, headers, body = self._probe_request(target)
        chain = self.http.follow("authz_probe", target.method, url, headers, body, timeout=timeout)
        final = chain[-1]
        redirected = [ex for ex in chain if ex.redirect]
        tool = self._tool(target.name) if target.mode == "tool" else None
        requires_subject = True if target.mode == "dedicated" else bool(tool and tool.requires_subject)
        outcome = _classify_probe(target, final, requires_subject)
        self.state.probe = outcome
        where = f"{target.method} {target.path}" + (
            f" (tool {target.name})" if target.mode == "tool" else " (dedicated endpoint)")
        sent = f"{where} as {PROBE_SUBJECT!r} -> {final.label()}"
        if redirected:
            sent += " after " + ", ".join(f"{ex.status} -> {ex.header('location')}" for ex in redirected)
        reason_code = _reason_of(final) if final.status is not None else None
        body_note = f"; body {final.text[:160]!r}" if final.body and final.status is not None else ""
        detail = sent + body_note
        if outcome.status == "pass":
            if final.status == 401 and reason_code in _SIGNATURE_REASONS:
                self.add(Check(
                    "authz_probe", "fail",
                    f"hub status pass, but only because the signature was refused ({reason_code})",
                    detail=detail + ("\nThe hub counts any 401 as a pass; this one means the endpoint "
                                     "could not verify the hub's signature, so it proves nothing and real "
                                     "calls fail the same way."),
                    fix=("The probe is signed like a tool call: the path WITHOUT the base_url prefix "
                         f"({target.path}), subject {PROBE_SUBJECT}, job 'probe'. Check the secret, "
                         "the clock and any proxy rewriting the path."),
                ))
            else:
                self.add(Check("authz_probe", "pass", f"hub status pass: {outcome.reason}", detail=detail))
        elif outcome.status == "suspect":
            self.add(Check(
                "authz_probe", "fail",
                f"hub status suspect: {outcome.reason}",
                detail=detail + ("\nTrap T22: the hub reads the first boolean among authorized, allow, "
                                 "allowed, ok; a generic {\"ok\": true} wrapper reads as 'authorized'. "
                                 "The hub raises an operator alert."),
                fix=("Run the real authorization for the probe subject and answer 200 "
                     "{\"authorized\": false} (or 403); never a bare {\"ok\": true}. "
                     "bailing_flask's own probe endpoint does this.") if target.mode == "dedicated" else (
                    f"Tool {target.name} must refuse unknown subjects with 401/403: wire "
                    "X-Bailing-On-Behalf-Of into the authorization (fail closed)."),
            ))
        else:
            strict = target.mode == "dedicated" or final.status is None or final.status >= 300
            fix = None
            if final.status == 404:
                fix = self._prefix_hint(target.path) or (
                    f"Serve the probe at base_url + {target.path} (the hub requests exactly that).")
            elif target.mode == "tool":
                fix = ("Declare a dedicated probe (bailing_flask: BAILING_PATH_PREFIX + /authz-probe) "
                       "or mark a subject-bound GET tool subject_required so the hub can judge it.")
            elif final.status is not None and 200 <= final.status < 300:
                fix = "Answer a top-level boolean: {\"authorized\": false} for the probe subject."
            self.add(Check(
                "authz_probe", "fail" if strict else "warn",
                f"hub status inconclusive: {outcome.reason}", detail=detail, fix=fix,
            ))
        if final.status is None or final.status == 404:
            self.skip("authz_probe.verifies", "the probe target is not reachable (see authz_probe)")
            return
        self._probe_verifies(target, timeout)

    def _probe_verifies(self, target: ProbeTarget, timeout: float) -> None:
        url, headers, body = self._probe_request(target, signature=ZERO_SIGNATURE)
        chain = self.http.follow("diagnostic_probe_bad_signature", target.method, url, headers, body,
                                 timeout=timeout)
        final = chain[-1]
        what = "the probe endpoint" if target.mode == "dedicated" else f"tool {target.name}"
        detail = f"{target.method} {target.path} with X-Bailing-Signature: sha256=0...0 -> {final.label()}"
        if final.status == 401:
            self.add(Check("authz_probe.verifies", "pass",
                           f"{what} refuses an invalid signature with 401", detail=detail))
        elif final.ok:
            self.add(Check(
                "authz_probe.verifies", "fail",
                f"{what} answers {final.status} to an invalid signature: it does not verify signatures",
                detail=detail + ("\nAnyone can call it; its answer to the hub's probe means nothing."),
                fix="Verify X-Bailing-Signature before answering (bailing_flask's middleware does this "
                    "for every route it serves).",
            ))
        elif final.status is None:
            self.add(Check("authz_probe.verifies", "warn", f"could not test: {final.error}", detail=detail))
        else:
            self.add(Check(
                "authz_probe.verifies", "warn",
                f"{what} answers {final.status} (not 401) to an invalid signature",
                detail=detail, fix="Refuse an invalid signature with 401 before anything else.",
            ))

    # -- 6. clock ------------------------------------------------------------------------------

    def clock_check(self) -> None:
        measured: list[tuple[float, _Exchange]] = []
        for exchange in self.http.log:
            if exchange.status is None:
                continue
            server = _server_time(exchange)
            if server is None:
                continue
            # Date has one-second resolution: the true time is in [date, date + 1)
            measured.append((server + 0.5 - (exchange.sent_at + exchange.received_at) / 2, exchange))
        if not measured:
            self.skip("clock", "no response carried a Date header")
            return
        uncached = [m for m in measured if not _cache_hits(m[1])] or measured
        skews = sorted(m[0] for m in uncached)
        skew = skews[len(skews) // 2]
        magnitude = abs(skew)
        direction = "ahead of" if skew > 0 else "behind"
        detail = (f"From the Date headers of {len(uncached)} response(s): the server is about "
                  f"{magnitude:.0f} s {direction} this machine (resolution ~1 s). The hub compares with its "
                  "own clock; this assumes this machine's clock is right (NTP). A proxy may set Date "
                  "with its own clock.")
        if self.offset:
            detail += (f"\nThe later checks were signed with the server's clock ({self.offset:+.0f} s) to "
                       "look past this problem.")
        if magnitude >= WINDOW_SECONDS:
            self.add(Check(
                "clock", "fail",
                f"the server's clock is {magnitude:.0f} s {direction} this machine: every signed request "
                f"is outside the {WINDOW_SECONDS} s window (timestamp_out_of_window)",
                detail=detail, fix="Synchronise the server's clock with NTP (chrony/systemd-timesyncd).",
            ))
        elif magnitude > CLOCK_TOLERANCE:
            self.add(Check(
                "clock", "warn",
                f"the server's clock is {magnitude:.0f} s {direction} this machine (window "
                f"{WINDOW_SECONDS} s)",
                detail=detail, fix="Synchronise the server's clock with NTP before the drift grows.",
            ))
        else:
            self.add(Check("clock", "pass", f"server clock within {CLOCK_TOLERANCE} s of this machine"))

    # -- 7. one signed tool call ---------------------------------------------------------------

    def tool_call(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("tool_call", "no catalog: no tool to call")
            return
        candidates = [t for t in compile_tools(document)
                      if t.method == "GET" and not t.required and t.readonly]
        if not candidates:
            self.skip("tool_call", "no parameter-less read-only GET tool to call safely")
            return
        if self.subject:
            tool = next((t for t in candidates if t.requires_subject), candidates[0])
        else:
            tool = next((t for t in candidates if not t.requires_subject), candidates[0])
        job = "doctor-" + uuid.uuid4().hex[:16]

        def request(signed_path: str, phase: str) -> list[_Exchange]:
            ts = self.now()
            headers = {
                "x-bailing-timestamp": ts,
                "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path, b"",
                                                      self.subject or "", job),
                "x-bailing-job-id": job,
                "x-bailing-client": "admin-debug",
                "x-bailing-tool-scope": tool.scope,
            }
            if self.subject:
                headers["x-bailing-on-behalf-of"] = self.subject
            return self.http.follow(phase, "GET", self.base_url + tool.path, headers)

        chain = request(tool.path, "tool_call")
        final = chain[-1]
        who = f"as {self.subject!r}" if self.subject else "anonymously"
        redirected = [ex for ex in chain if ex.redirect]
        line = f"GET {self.base_url}{tool.path} (tool {tool.name}, signed path {tool.path!r}) {who} -> {final.label()}"
        if redirected:
            line += " after " + ", ".join(f"{ex.status} -> {ex.header('location')}" for ex in redirected)
        reason = _reason_of(final) if final.status is not None else None
        if final.body and final.status is not None and not final.ok:
            line += f"; body {final.text[:160]!r}"
        if redirected:
            self.add(Check(
                "tool_call", "fail",
                f"tool {tool.name} was redirected ({redirected[0].status} -> "
                f"{redirected[0].header('location')}); the redirected request cannot be verified",
                detail=line + "\n" + _T8,
                fix="Serve the tool at exactly base_url + its catalog path (no trailing-slash 308, "
                    "http->https or login redirects); fix base_url if the redirect points elsewhere.",
            ))
            return
        if final.status is None:
            self.add(Check("tool_call", "fail", f"the tool call failed: {final.error}", detail=line,
                           fix="Make base_url reachable from the hub."))
            return
        if final.status == 401:
            self._diagnose_tool_401(tool, final, reason, line, request)
            return
        content_type = (final.header("content-type") or "").lower()
        html = "text/html" in content_type or _js_trim(final.text[:64]).lower().startswith(
            ("<!doctype html", "<html"))
        if html and not final.ok:
            line += ("\nThe body is HTML: the model only sees 'HTTP "
                     f"{final.status}' and that an HTML error page came back, not its text.")
        if final.status == 404:
            self.add(Check(
                "tool_call", "fail",
                f"tool {tool.name} answers 404 at {self.base_url}{tool.path}: the hub cannot reach it",
                detail=line, fix=self._prefix_hint(tool.path),
            ))
            return
        if final.ok:
            units = len(final.text.encode("utf-16-le")) // 2
            if units > 8192:
                self.add(Check(
                    "tool_call", "warn",
                    f"tool {tool.name} {who}: HTTP {final.status}, but the answer is {units} UTF-16 units; "
                    "the model reads only the first 8192",
                    detail=line,
                    fix="Page or summarise large results: the hub cuts the answer before the model reads it.",
                ))
                return
            self.add(Check("tool_call", "pass",
                           f"tool {tool.name} {who}: HTTP {final.status}; the signature path works",
                           detail=line))
            return
        if final.status == 403:
            note = "" if self.subject else " (pass --subject to try a real user)"
            self.add(Check("tool_call", "pass",
                           f"tool {tool.name} {who}: 403 {reason or ''}".rstrip() +
                           f"; the signature was accepted, the subject refused{note}", detail=line))
            return
        if final.status >= 500:
            self.add(Check("tool_call", "warn",
                           f"tool {tool.name} {who}: server error {final.status}", detail=line,
                           fix="See the server log."))
            return
        self.add(Check("tool_call", "warn",
                       f"tool {tool.name} {who}: HTTP {final.status}" + (f" ({reason})" if reason else ""),
                       detail=line))

    # -- 8. every write tool, with the probe subject -----------------------------------------------

    def write_tools(self) -> None:
        """Send each POST/PUT/PATCH/DELETE tool the hub's request as the probe subject.

        What stands in front of a write tool (a CSRF check, a session guard,
        a login redirect, a limiter) is only seen with a write request. The
        request carries the probe subject, whose authorization must be
        denied, plus an undeclared argument, which bailing_flask's gate
        refuses (422 unknown_parameter) before it even asks the authorizer:
        nothing can run. Not sent at all when the authorization probe did
        not deny the probe subject; redirects are not followed.
        """
        document = self.state.document
        if not self.send_writes:
            self.skip("write_tools", "not asked for (--no-write-tools)")
            return
        if document is None:
            self.skip("write_tools", "no catalog: no tool to check")
            return
        writes = [t for t in compile_tools(document) if t.method in ("POST", "PUT", "PATCH", "DELETE")]
        if not writes:
            self.skip("write_tools", "no POST/PUT/PATCH/DELETE tool in the catalog")
            return
        probe = self.state.probe
        if probe is not None and (probe.status == "suspect" or (
                probe.http is not None and 200 <= probe.http < 300 and probe.status != "pass")):
            # the probe endpoint did not deny the probe subject: send it nothing that writes
            self.skip("write_tools", "the authorization probe did not deny the probe subject, so it might "
                      "be authorized somewhere: no write request was sent")
            return
        from bailing_flask._pipeline.samples import sample_arguments
        from bailing_flask.testing import HubSimulator

        hub = HubSimulator(self.base_url, self.secret, client="__probe__",
                           clock=lambda: float(self.now()))
        hub._document = document
        lines: list[str] = []
        fixes: list[str] = []
        failed = 0
        for tool in writes:
            operation = document["paths"][tool.path][tool.method.lower()]
            # made-up values only: an example's id may name a real record of the deployment
            args = {**sample_arguments(operation, authored=False), _DOCTOR_MARKER: True}
            call = hub.build_call(tool.name, args, subject=PROBE_SUBJECT, job_id="probe")
            exchange = self.http.send("write_tools", call.method, self.base_url + call.path_with_query,
                                      call.headers, call.body)
            ok, what, fix = self._classify_write(exchange, tool.path)
            lines.append(f"{'ok  ' if ok else 'FAIL'} {tool.method} {tool.path} (tool {tool.name}): {what}")
            if not ok:
                failed += 1
                if fix and fix not in fixes:
                    fixes.append(fix)
        detail = "\n".join(lines) + (
            f"\nEach request: the hub's signed call as {PROBE_SUBJECT!r} (job 'probe') with the "
            f"undeclared argument {_DOCTOR_MARKER!r}, which the gate refuses before authorization.")
        if failed:
            self.add(Check(
                "write_tools", "fail",
                f"{failed} of {len(writes)} write tool(s) were answered by something other than the gate",
                detail=detail, fix="\n".join(fixes) or None,
            ))
        else:
            self.add(Check("write_tools", "pass",
                           f"{len(writes)} write tool(s): the gate answered every one", detail=detail))

    def _classify_write(self, exchange: _Exchange, path: str) -> tuple[bool, str, str | None]:
        label = exchange.label()
        if exchange.status is None:
            return False, label, "Make base_url reachable from the hub."
        reason = exchange.header("x-bailing-reason")
        body_reason = _reason_of(exchange)
        if reason is not None or (exchange.status in (403, 409, 422) and body_reason in _KNOWN_REASONS):
            code = reason or body_reason
            if exchange.status == 401 and code in _SIGNATURE_REASONS:
                return False, f"{label} {code}: the signature was refused", (
                    "Write tools are signed like every tool call (path without the base_url prefix, the "
                    "exact body bytes); see tool_call for the read tool.")
            note = "" if reason is not None else " (no X-Bailing-Reason header: a proxy drops it?)"
            return True, f"the gate answered {exchange.status} {code}{note}", None
        text = exchange.text[:2048]
        lowered = text.lower()
        html = "text/html" in (exchange.header("content-type") or "").lower() or _js_trim(
            text[:64]).lower().startswith(("<!doctype html", "<html"))
        what = label + (" (an HTML page)" if html else (f" {text[:120]!r}" if text.strip() else ""))
        if exchange.redirect:
            return False, f"{label} redirect to {exchange.header('location')}", (
                "Something redirects write requests (a login page, http->https): hub calls must reach "
                "the gate. With Flask-Login: bailing.bridge_flask_login(login_manager); for a guard: "
                "`if bailing_flask.is_hub_request(): return None`.")
        if exchange.ok:
            return False, f"{label}: the request was ACCEPTED (a side effect may have run)", (
                "A write tool accepted the probe subject with an undeclared argument: it is not behind "
                "bailing_flask's gate (or its authorizer admits unknown subjects). Check it now.")
        if exchange.status == 400 and "csrf" in lowered:
            return False, f"{what}: a CSRF check", (
                "A CSRF check answered before the gate: with Flask-WTF's CSRFProtect leave "
                "BAILING_CSRF_EXEMPT on (it exempts verified tool calls only).")
        if exchange.status == 429:
            return False, f"{what}: a rate limit", (
                "A rate limit keyed on the address puts every hub user into one bucket: "
                "Limiter(key_func=bailing_flask.rate_limit_key).")
        if exchange.status == 404:
            return False, what, self._prefix_hint(path)
        if exchange.status == 401:
            return False, f"{what}: not the gate's refusal", (
                "An app-level check (a before_request guard, an auth decorator or a gateway) answered "
                "401 before the gate: let hub requests through with "
                "`if bailing_flask.is_hub_request(): return None`.")
        return False, what, ("Something in front of the gate answered; run `flask bailing check "
                             "--exercise` in the app to name it.")

    # -- 9. redirects --------------------------------------------------------------------------

    def redirects(self) -> None:
        seen = [ex for ex in self.http.log if ex.redirect and not ex.phase.startswith("diagnostic")]
        if not seen:
            self.add(Check("redirects", "pass", "no request was redirected"))
            return
        lines = [f"{ex.phase}: {ex.method} {ex.url} -> {ex.status} {ex.header('location')}" for ex in seen]
        phases = sorted({ex.phase for ex in seen})
        self.add(Check(
            "redirects", "fail",
            f"{len(seen)} redirect(s) on {', '.join(phases)}",
            detail="\n".join(lines) + "\n" + _T8,
            fix=("Answer hub requests directly: no http->https (use the https URL), trailing-slash "
                 "(strict_slashes) or login redirects on the catalog, the probe or any tool path; "
                 "unsigned catalog requests must get 401, not a redirect to a login page (T21)."),
        ))
