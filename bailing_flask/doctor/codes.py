"""The doctor's checks and the hub's verdicts it reports, in one table.

:data:`CHECKS` lists every check in report order: what it looks at, the hub
functions whose behaviour it reproduces (checked against hub commit
``c6f1d24911fc47df79bb144b6d8b7ac93b381008``, see
:data:`bailing_flask.lint.codes.HUB_COMMIT`), and when it passes, warns, fails
or is skipped. :data:`ACCESS_VERDICTS` and :data:`PROBE_VERDICTS` say what the
hub's own verdicts mean. The "Lint and doctor codes" page of the documentation
is generated from these tables, next to the lint's finding codes.

The tables are data, longer than a function may be on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from bailing_flask.lint.codes import HubRef

__all__ = ["DoctorCheck", "Verdict", "CHECKS", "STATUSES", "ACCESS_VERDICTS", "PROBE_VERDICTS"]


@dataclass(frozen=True)
class DoctorCheck:
    """One check of ``flask bailing doctor``."""

    name: str
    #: what the check sends or reads
    what: str
    #: the hub functions whose behaviour it reproduces (empty: the doctor's own check)
    mirrors: tuple[HubRef, ...]
    passes: str
    fails: str
    warns: str | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class Verdict:
    """One value of a status the doctor reports, and what it means."""

    value: str
    meaning: str


_SPECS = "src/app/tool-specs.ts"

_TOOL_CALL = HubRef("src/core/contracts/tools.ts", "buildToolRuntime")

#: Every check of the doctor, in report order.
CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        "base_url",
        "The path of the hub's base_url against the base URL the app's catalog paths are "
        "relative to (its BAILING_BASE_URL, as flask bailing doctor passes it). Runs only when "
        "that base URL is known; the report then also prints the base_url to register.",
        (),
        passes="the paths match (a different origin is noted: the hub must use the app's).",
        fails="the paths differ: the hub would accept the tool source and then send every tool "
        "call to a URL that misses the route.",
    ),
    DoctorCheck(
        "catalog.access",
        "The hub's catalog fetch: a signed GET of spec_url that never follows redirects "
        "(unsigned under public_allowed), then, after a 2xx, two concurrent negative probes: "
        "unsigned, and the same timestamp with a signature of zeros.",
        (HubRef(_SPECS, "fetchProviderSpecWithPolicy"), HubRef(_SPECS, "negativeSpecRequest")),
        passes="protected (public under the public_allowed policy).",
        fails="public under signed_required (the doctor says whether a cache or the origin "
        "leaks it), or inconclusive: the fetch failed, was redirected or refused, the body is "
        "over 5 MiB, or a negative probe got something other than 401, 403 or 404. A refused "
        "fetch is retried with corrected signatures to name the layer that rewrote it.",
    ),
    DoctorCheck(
        "catalog.caching",
        "Cache-Control of the signed catalog and the headers that show a cache answered it "
        "(Age, X-Cache, CF-Cache-Status and the like). The hub does not look at them.",
        (),
        passes="private, no-store is sent and no cache answered (always, for a catalog under "
        "the public_allowed policy).",
        warns="Cache-Control lacks private or no-store.",
        fails="a cache serves the signed catalog.",
        skipped="there is no catalog response.",
    ),
    DoctorCheck(
        "catalog.body",
        "The body as the hub reads it: at most 5 MiB, JSON (or YAML), an object.",
        (HubRef(_SPECS, "readSpecBody"),
         HubRef("src/core/contracts/openapi-tools.ts", "parseOpenApiSpec")),
        passes="a JSON object served as application/json.",
        warns="the body is YAML, or the Content-Type is not JSON.",
        fails="the body is empty, neither JSON nor YAML (an HTML page, usually), or not an "
        "object.",
        skipped="there is no catalog response.",
    ),
    DoctorCheck(
        "catalog.lint",
        "The lint of the catalog as served (see the finding codes above).",
        (HubRef("src/core/contracts/openapi-tools.ts", "compileOpenApiTools"),),
        passes="no error and no warning.",
        warns="warnings only.",
        fails="at least one error finding.",
        skipped="there is no catalog.",
    ),
    DoctorCheck(
        "authz_probe",
        "The hub's authorization probe: its choice of target (a dedicated endpoint, else a "
        "GET tool without required arguments) and its verdict, plus a stricter reading of a "
        "pass.",
        (HubRef(_SPECS, "dedicatedAuthzProbeTarget"), HubRef(_SPECS, "pickProbeTarget"),
         HubRef(_SPECS, "probeAuthorizeFor"), HubRef(_SPECS, "classifyDedicatedAuthzProbe")),
        passes="the hub's verdict is pass.",
        warns="the hub skips the probe (no target), or a tool without subject.required "
        "answered 2xx (inconclusive).",
        fails="suspect; pass only because the signature was refused (a 401 with a signature "
        "reason); or inconclusive from a dedicated endpoint, a failed request or a non-2xx "
        "answer.",
        skipped="there is no catalog.",
    ),
    DoctorCheck(
        "authz_probe.verifies",
        "The probe target once more, with a signature of zeros. The hub never sends this.",
        (),
        passes="the target refuses the bad signature with 401.",
        warns="another refusal than 401, or the request failed.",
        fails="the target answers 2xx: it does not verify signatures.",
        skipped="there is no probe target, or it is not reachable.",
    ),
    DoctorCheck(
        "clock",
        "The server's clock, from the Date headers of the responses (uncached ones first), "
        "against this machine's; the hub refuses signatures 300 s or more apart.",
        (),
        passes="within 5 s.",
        warns="more than 5 s apart.",
        fails="300 s or more apart: every signed request is refused.",
        skipped="no response carried a Date header.",
    ),
    DoctorCheck(
        "tool_call",
        "One signed call of a parameter-less, read-only GET tool as the hub makes it, "
        "redirects followed like fetch; anonymous unless a subject is given.",
        (_TOOL_CALL,),
        passes="2xx, or 403 (the signature was accepted, the subject refused).",
        warns="an answer longer than the model reads (8192 UTF-16 units), a server error, or "
        "another status.",
        fails="a redirect, a failed request, 404, or 401 (retried with corrected signatures to "
        "name the layer that rewrote the request).",
        skipped="there is no catalog, or no such tool.",
    ),
    DoctorCheck(
        "write_tools",
        "To every POST/PUT/PATCH/DELETE tool, the hub's signed call as the probe subject (job "
        "probe) with one undeclared argument, which bailing_flask's gate refuses "
        "(422 unknown_parameter) before it asks the authorizer, so nothing runs; redirects are "
        "not followed. Shows a CSRF check, a session guard, a login redirect or a limiter in "
        "front of the write tools.",
        (_TOOL_CALL,),
        passes="the gate answered every write tool.",
        fails="something else answered a write tool: a redirect, a CSRF check, a rate limit, a "
        "401 or 404 from in front of the gate, a refused signature, a failed request, or a 2xx "
        "(the request was accepted).",
        skipped="--no-write-tools, no catalog, no write tool, or the authorization probe did not "
        "deny the probe subject (then nothing that writes is sent).",
    ),
    DoctorCheck(
        "redirects",
        "Every redirect seen by the requests above (the diagnostic ones aside).",
        (),
        passes="no request was redirected.",
        fails="any redirect: the hub re-sends the signature for the new path, which cannot "
        "verify, and never follows one on the catalog.",
    ),
)

#: What each status of a check means in the report and its exit code.
STATUSES: tuple[Verdict, ...] = (
    Verdict("pass", "the hub will be satisfied with this part."),
    Verdict("warn", "it works, but something may break it or hide a problem."),
    Verdict("fail", "the hub refuses or cannot use this part; the report is NOT OK (exit 1)."),
    Verdict("skip", "an earlier check left nothing to look at."),
)

#: ``DoctorReport.catalog_access.status``: the hub's verdict on who can read the catalog.
ACCESS_VERDICTS: tuple[Verdict, ...] = (
    Verdict("protected", "signed reads succeed; unsigned and bad-signature reads are refused "
            "with 401, 403 or 404. The hub accepts the refresh."),
    Verdict("public", "anyone can read the catalog. Accepted under the public_allowed policy; "
            "under signed_required the hub refuses the refresh."),
    Verdict("inconclusive", "the hub could not tell (the fetch failed or was refused, or a "
            "negative probe got another answer); it refuses the refresh and keeps its old "
            "catalog."),
)

#: ``DoctorReport.authz_probe.status``: the hub's verdict from its authorization probe.
PROBE_VERDICTS: tuple[Verdict, ...] = (
    Verdict("pass", "the synthetic subject was refused (401 or 403, or a dedicated endpoint "
            "answered a false decision)."),
    Verdict("suspect", "the synthetic subject was let in (a true decision, or 2xx from a tool "
            "that declares subject.required); the hub raises an operator alert."),
    Verdict("inconclusive", "the answer proves neither (another status, a 2xx without a "
            "decision, or a failed request)."),
    Verdict("skipped", "there is no probe target: no dedicated endpoint and no GET tool without "
            "required arguments."),
)
