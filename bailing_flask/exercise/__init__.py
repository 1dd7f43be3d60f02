"""``flask bailing check --exercise``: send the hub's requests in-process, see who answers.

A clean catalog says nothing about what stands between the hub and the
gate: a ``before_request`` guard, Flask-WTF's CSRF check, Flask-Limiter,
``login_required`` on the view, a cache. Each answers hub calls in its own
way (a 401 the model reads as a signature problem, a login redirect, a 400)
while ``flask bailing check`` reported nothing. The exercise sends, in
process, a request signed exactly like the hub's to every declared tool,
every method, and checks that the package answered:

``probe``
    The hub's request with the probe subject ``__bailing_authz_probe__:nobody``.
    The gate must refuse it (its authorization must be denied); if the
    authorizer admits it, the view does not run and that is reported.
``stack``
    The same request as the ``--subject`` user (without one, as the probe
    subject), through the whole gate: the authorizer decides for real, and
    when it admits the call the view's own decorators (``login_required``,
    ``MethodView.decorators``, caches) run as for a real call. The declared
    view is never called: where it would run, the exercise stops. A refusal
    by the gate is the check's result (pass ``--subject`` with a user the
    authorizer admits).
``unsigned``
    Two unsigned requests (without credentials, with a dummy bearer token)
    to every tool that does not declare ``allow_unsigned``, through the gate
    with that tool flagged ``allow_unsigned=True`` for the one request: where
    the app's own code answers them, the route has clients of its own that
    ``@tool`` now refuses (:mod:`bailing_flask.exercise._unsigned`). The view
    never runs.
``subject``
    With ``--subject``, a real subject on every read-only tool: the view
    runs, and must be reached.
``reads``
    While those views run: the query and body keys they read that the
    tool's catalog entry does not declare (:mod:`bailing_flask.exercise._reads`).
``cache``
    A cache in front of a read-only tool must not give one subject's answer
    to another: with a second ``--subject`` the tool is called as both, and
    an answer the second got without the view running is reported with the
    decorator that gave it; otherwise the key of each Flask-Caching decorator
    is read.
``config`` (target ``limiter``)
    With Flask-Limiter: are two hub users' calls from one address counted in
    one bucket? The limits applied before the gate are compared from two
    refused calls, a route's own ``@limiter.limit`` from the admitted
    ``stack`` call (:mod:`bailing_flask.exercise._limiter`). No call is
    counted that the exercise does not send anyway.

The exercise runs the app's own code: every request runs the
``before_request`` functions, the subject loader and the authorizer; the
``stack`` requests run the view's decorators, the ``subject`` requests the
views of read-only tools. Before it sends anything it says which functions
those are and which databases they may write to, and it takes back every
write it can reach (:mod:`bailing_flask.exercise._database`); the report
ends with what did run. ``probe_only`` sends only the probe requests, which
run what the hub's own probe runs in production. A subject loader that
returns a user for the probe subject is an error, and so is one whose users
Flask-Login cannot use when the Flask-Login bridge is on.

The gate has no exercise mode: every request of the exercise passes the
same steps as the hub's, observed from outside the gate
(:mod:`bailing_flask.exercise._admission`, :mod:`bailing_flask.exercise._watch`);
its de-duplication and replay records go to a throwaway memory store, for
its own requests only.
No view with a side effect ever runs. Anything else that answered is named
(the ``before_request`` function, found by watching each one; the
``after_request`` function that rewrote a refusal; the redirect target;
the extension) with how to fix it. The hooks of the app, its subject
loader and authorizer and its Flask-Login manager are watched only for the
duration of the run: do not run it in a process that serves traffic.
"""

from __future__ import annotations

import contextvars
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from flask import Flask

from bailing_flask._pipeline.samples import sample_arguments
from bailing_flask.exercise._routes import unroutable_sample
from bailing_flask.errors import ConfigurationError
from bailing_flask.exercise._admission import for_this_request, unguarded
from bailing_flask.exercise._approval import approve_own_request
from bailing_flask.exercise._database import databases, roll_back_here, rolled_back
from bailing_flask.exercise._hooks import foreign_hook_fix, https_fix, https_redirect, package_of
from bailing_flask.exercise._limiter import SECOND_SUBJECT, Bucket, breached, limiter_check, recording
from bailing_flask.exercise._reads import Reads, reads_check, recording_reads
from bailing_flask.exercise._unsigned import unsigned_check, unsigned_plan
from bailing_flask.exercise._stack import cache_layers, code_name, decorators_of, view_name, watched_names
from bailing_flask.exercise._watch import _Watch
from bailing_flask._pipeline.gate import EXERCISE_KEY, ExerciseProbe, ExerciseStop
from bailing_flask.integrations import login_user_problem
from bailing_flask.lint import CompiledTool, compile_tools
from bailing_flask.responses import REASON_HEADER
from bailing_flask.stores.memory import MemoryStore
from bailing_flask.wire.signing import primary_secret
from bailing_flask.testing import PROBE_BODY, PROBE_SUBJECT, HubResponse, HubSimulator, catalog_headers, signed_headers
from bailing_flask._pipeline.registry import registry_of
from bailing_flask._pipeline.catalog import catalog_of

__all__ = ["ExerciseResult", "ExerciseReport", "run_exercise"]

Status = Literal["pass", "warn", "fail"]

_IS_HUB_REQUEST = "`if bailing_flask.is_hub_request(): return None`"
_EXTENSIONS = {
    "flask_wtf": "Flask-WTF's CSRFProtect",
    "flask_limiter": "Flask-Limiter",
    "flask_login": "Flask-Login",
    "flask_caching": "Flask-Caching",
    "flask_httpauth": "Flask-HTTPAuth",
    "flask_security": "Flask-Security",
    "flask_principal": "Flask-Principal",
}


@dataclass(frozen=True)
class ExerciseResult:
    """One request of the exercise and what answered it."""

    #: ``catalog``, ``authz_probe``, ``limiter`` or ``tool <name> (<METHOD> <path>)``
    target: str
    #: ``fetch``, ``probe``, ``stack``, ``unsigned``, ``subject``, ``reads``, ``cache``, ``loader`` or ``config``
    check: str
    status: Status
    summary: str
    #: who answered instead of the package, when it can be named
    culprit: str | None = None
    fix: str | None = None


@dataclass
class ExerciseReport:
    results: list[ExerciseResult] = field(default_factory=list)
    #: what of the app's code the exercise was going to run, and on which databases
    plan: list[str] = field(default_factory=list)
    #: what of the app's code did run, and whether its writes were taken back
    ran: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(result.status != "fail" for result in self.results)

    def render(self) -> str:
        lines = []
        for result in self.results:
            lines.append(f"{result.status.upper():5} {result.check:8} {result.target}: {result.summary}")
            if result.culprit:
                lines.append(f"      culprit: {result.culprit}")
            if result.fix:
                lines.append(f"      fix: {result.fix}")
        lines.extend(self.ran)
        counts = {s: sum(1 for r in self.results if r.status == s) for s in ("pass", "warn", "fail")}
        lines.append(f"exercise: {counts['pass']} passed, {counts['warn']} warning(s), "
                     f"{counts['fail']} failed")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "plan": self.plan, "ran": self.ran,
                "results": [result.__dict__ for result in self.results]}


def _qualname(func: Any) -> str:
    return view_name(func)


def _extension_of(func: Any) -> str | None:
    module = str(getattr(func, "__module__", "") or "")
    return _EXTENSIONS.get(module.split(".", 1)[0])


def _httpauth_culprit(seen: tuple[Any, Any], status: int) -> tuple[str, str]:
    auth, user = seen
    what = f"{type(auth).__name__} (scheme {getattr(auth, 'scheme', None)!r})"
    if user in (False, None):
        why = "a hub call carries no credentials of its own, so it is not authenticated"
    else:
        why = "its get_user_roles refused the role the view asks for"
    return (f"Flask-HTTPAuth: login_required of the {what} answered {status}: {why}",
            "call bailing.bridge_flask_httpauth(auth): for admitted calls login_required then passes "
            "with the subject loader's user (roles from your get_user_roles), and auth.current_user() "
            "is that user")


class _Exercise:
    def __init__(self, app: Flask, secret: str, subjects: Sequence[str], probe_only: bool = False,
                 https: bool | None = None) -> None:
        from bailing_flask._state import state_of

        self.app = app
        self.state = state_of(app)
        self.subject = subjects[0] if subjects else None
        #: a second subject, to see that no answer of the first one reaches it
        self.other = subjects[1] if len(subjects) > 1 else None
        self.probe_only = probe_only
        self.https_option = bool(https)
        self.hub = HubSimulator(app, secret, client="__probe__", https=https)
        self.report = ExerciseReport()
        self.watch = _Watch(app, self.state.callbacks)
        self.job = "exercise-" + uuid.uuid4().hex[:16]
        #: where the de-duplication and replay records of the run's requests go
        self.store = MemoryStore()
        self.databases = databases(app)
        self.views_ran: list[str] = []
        self.stacks_ran: set[str] = set()
        #: ``id(probe)`` -> the endpoint and method it was sent to
        self.targets: dict[int, tuple[str, str]] = {}
        #: ``(tool, subject)`` -> the first request sent for it
        self.sent: dict[tuple[str, str | None], ExerciseProbe] = {}
        #: ``id(probe)`` -> the query and body keys the view read (``subject`` requests)
        self.reads: dict[int, Reads] = {}
        #: ``id(probe)`` -> the Flask-Limiter buckets the request was counted in
        self.buckets: dict[int, list[Bucket]] = {}
        #: ``id(probe)`` -> for a request the gate refused, the buckets the view's own
        #: ``@limiter.limit`` decorators would have counted it in (read, not counted)
        self.unrun: dict[int, list[Bucket]] = {}
        #: ``(tool, subject, probe)`` of every tool request, in the order sent
        self.history: list[tuple[str, str | None, ExerciseProbe]] = []

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.report.results.append(ExerciseResult(*args, **kwargs))

    # -- what will run --------------------------------------------------------------------

    def plan(self) -> list[str]:
        """Which of the app's functions the exercise runs, and on which databases, in words."""
        ext = self.state.callbacks
        lines = ["the exercise runs this app's own code, in this process:", self._scheme_line()]
        hooks = [name for name in watched_names(self.app.before_request_funcs)
                 if not name.startswith("bailing_flask")]
        lines.append("  before_request (every request): " + (", ".join(hooks) or "none"))
        subjects = [PROBE_SUBJECT] + [s for s in (self.subject, self.other) if s]
        # with Flask-Limiter, a second unknown user from the same address (see the limiter check)
        loaded = subjects + ([SECOND_SUBJECT] if self.app.extensions.get("limiter") else [])
        loader = ext.subject_loader_func
        lines.append(f"  subject loader: {code_name(loader) if loader else 'none'} "
                     f"(for {', '.join(repr(s) for s in loaded)})")
        authorizer = ext.authorizer_func
        lines.append(f"  authorizer: {code_name(authorizer) if authorizer else 'none (tool authorizers only)'}")
        for tool in registry_of(self.state).tools:
            decorators = decorators_of(self.app, tool.endpoint, tool.method)
            if self.probe_only:
                runs = "nothing of the view's stack (probe requests only)"
            else:
                runs = (f"decorators {', '.join(decorators)}" if decorators else "no decorator")
                if tool.readonly and self.subject:
                    runs += f"; the view, as {' and '.join(repr(s) for s in subjects[1:])}"
                else:
                    runs += "; never the view"
            lines.append(f"  tool {tool.name} ({tool.method} {tool.path}): {runs}")
        lines.extend(unsigned_plan(registry_of(self.state).tools, self.probe_only))
        after = [name for name in watched_names(self.app.after_request_funcs)
                 if not name.startswith("bailing_flask")]
        if after:
            lines.append("  after_request (every request): " + ", ".join(after))
        if self.databases:
            lines.append("databases:")
            lines.extend(f"  {database.describe()}" for database in self.databases)
        else:
            lines.append("databases: none known to bailing_flask (no Flask-SQLAlchemy, no "
                         "BAILING_TRANSACTION): what this code writes stays written")
        if not all(database.rolled_back for database in self.databases) or not self.databases:
            if not self.probe_only:
                lines.append("  (--probe-only sends only the hub's probe requests: the before_request "
                             "functions, the subject loader and the authorizer run, no decorator, no view)")
        return lines

    def _scheme_line(self) -> str:
        base_url = self._base_url()
        if self.https_option:
            why = "--https"
        elif base_url:
            why = f"the scheme of BAILING_BASE_URL {base_url}"
        else:
            why = "BAILING_BASE_URL is not set: Flask's PREFERRED_URL_SCHEME" + (
                "; --https sends https" if self.hub.scheme == "http" else "")
        return f"  requests: over {self.hub.scheme} ({why})"

    # -- who answered --------------------------------------------------------------------

    def _answer(self, response: HubResponse) -> str:
        content_type = response.headers.get("Content-Type", "")
        html = "text/html" in content_type or response.body[:64].lstrip().lower().startswith(
            (b"<!doctype html", b"<html"))
        what = f"HTTP {response.status}"
        if response.status in (301, 302, 303, 307, 308):
            what += f" redirect to {response.headers.get('Location')}"
        if html:
            what += " (an HTML page: the model only sees the status and that HTML came back)"
        else:
            text = response.text.strip().replace("\n", " ")
            if text:
                what += f" {text[:120]!r}"
        return what

    def _culprit(self, probe: ExerciseProbe, response: HubResponse) -> tuple[str, str]:
        """Name what answered instead of the package, and how to fix it."""
        status = response.status
        exception = self.watch.exceptions.get(id(probe))
        if probe.hook is not None:
            func, raised = probe.hook
            original = getattr(func, "__wrapped__", func)
            blueprint = getattr(func, "__bailing_blueprint__", None)
            where = f"before_request function {_qualname(original)}" + (
                f" (blueprint {blueprint!r})" if blueprint else "")
            how = f"raised {type(raised).__name__}" if raised is not None else f"answered {status}"
            extension = _extension_of(original) or package_of(original)
            if self._https_redirect(response):
                fix = https_fix(self._base_url(), original)
            elif extension == "Flask-WTF's CSRFProtect":
                fix = ("bailing_flask exempts verified tool calls from CSRFProtect when "
                       "BAILING_CSRF_EXEMPT is on (the default) and the CSRFProtect is the one in "
                       "app.extensions['csrf']; browsers stay checked")
            elif extension == "Flask-Limiter":
                fix = ("key the limiter on the acting subject: Limiter(key_func=bailing_flask.rate_limit_key); "
                       "in process every request comes from one address")
            elif extension is not None:
                fix = foreign_hook_fix(original, extension)
            else:
                fix = (f"make it step aside for hub requests with {_IS_HUB_REQUEST} as its first line; "
                       "the gate still checks the signature, subject, arguments and authorization")
            return f"{extension + ': ' if extension else ''}{where} {how}", fix
        limited = breached(self.buckets.get(id(probe), []), status)
        if limited is not None:  # RateLimitExceeded, raised after the gate: in the view's decorators
            return limited
        if probe.flask_login is not None:
            which = "fresh_login_required" if probe.flask_login == "needs_refresh" else "login_required"
            where = f"Flask-Login's {which} (login_manager.{probe.flask_login}())"
            if status in (301, 302, 303, 307, 308):
                where += f", redirecting to {response.headers.get('Location')}"
            if which == "fresh_login_required":
                return where, ("a hub call is never a fresh login: remove fresh_login_required from "
                               "this tool's view, or do not expose it as a tool")
            return where, ("call bailing.bridge_flask_login(login_manager): current_user is then the "
                           "subject loader's user for admitted calls")
        httpauth = self.watch.httpauth.get(id(probe))
        if httpauth is not None and status in (401, 403) and REASON_HEADER not in response.headers:
            return _httpauth_culprit(httpauth, status)
        if exception is not None:
            return (f"the request raised {type(exception).__name__}: {str(exception)[:160]}",
                    "see the traceback in the log")
        if self._https_redirect(response):
            return f"a redirect to {response.headers.get('Location')}", https_fix(self._base_url())
        if status in (301, 302, 303, 307, 308):
            return (f"a redirect to {response.headers.get('Location')}",
                    "serve the tool at exactly its catalog path: the hub follows redirects and re-sends "
                    "the signature for another path, which cannot verify (301/302/303 also turn a POST "
                    "into a GET)")
        if status in (404, 405):
            return (f"routing answered {status} before any view",
                    "the hub requests base_url + the catalog path with this method; check SERVER_NAME, "
                    "subdomain rules and before_request functions that abort")
        if probe.mode in ("stack", "subject") and probe.gate == "admitted" and 200 <= status < 300:
            layers = self._cached_by(probe)
            cache = f" ({layers})" if layers else (
                " (Flask-Caching's cache.cached?)" if "cache" in self.app.extensions else "")
            return (f"something between the route and @tool answered {status} without calling the "
                    f"view: a cached response{cache}",
                    "a response cached by path is one subject's data served to another: key the cache "
                    "on the subject (bailing_flask.cache_key), or keep caching out of tool views")
        return (f"something other than bailing_flask answered: {self._answer(response)}",
                "find what answers this path before the view (after_request functions and error "
                "handlers included)")

    def _https_redirect(self, response: HubResponse) -> bool:
        return https_redirect(response.status, response.headers.get("Location"), self.hub.scheme)

    def _base_url(self) -> str | None:
        base_url = self.state.middleware.base_url
        return base_url.url if base_url is not None else None

    def _cached_by(self, probe: ExerciseProbe) -> str:
        where = self.targets.get(id(probe))
        if where is None:
            return ""
        layers = cache_layers(self.app, *where)
        return "; ".join(layer.describe() for layer in layers)

    # -- the checks -----------------------------------------------------------------------

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes,
              probe: ExerciseProbe) -> HubResponse:
        where = self.targets.get(id(probe))
        if where is not None and probe.mode in ("stack", "unsigned") and unguarded(self.state, where[0]):
            probe.unguarded = True  # nothing would stop an admitted request before the view: not sent
            return HubResponse(200, {}, b"", None)

        def send() -> HubResponse:
            for_this_request(self.state, self.store, where if probe.mode == "unsigned" else None)
            roll_back_here()
            try:
                return self.hub.send(method, target, headers, body, None, environ={EXERCISE_KEY: probe})
            except ExerciseStop:  # admitted, and stopped where the declared view would run
                outcome = {"exercise": "reached" if probe.reached_view else "stopped", "mode": probe.mode}
                return HubResponse(200, {"Content-Type": "application/json", "Cache-Control": "no-store"},
                                   json.dumps(outcome).encode(), None)

        # each request in a fresh context: under `flask bailing ...` an app context is
        # already pushed, and requests would share its `g` (Flask-Login keeps its user there);
        # the throwaway store, the unsigned flag and the rollback are set in it, for this request alone
        return contextvars.Context().run(send)

    def send(self, mode: str, tool: CompiledTool, args: dict[str, Any], subject: str | None
             ) -> tuple[ExerciseProbe, HubResponse]:
        probe = ExerciseProbe(mode)
        registered = self._tool(tool)
        if registered is not None:
            self.targets[id(probe)] = (registered.endpoint, registered.method)
        self.sent.setdefault((tool.name, subject), probe)
        self.history.append((tool.name, subject, probe))
        # a job id of its own for each check: two checks' requests are never byte-identical
        # (with BAILING_REJECT_REPLAYS the second would be refused as a replay)
        job_id = f"{self.job}-{mode}"
        if registered is not None and registered.options.business_approval \
                and subject not in (None, PROBE_SUBJECT):
            approve_own_request(self.store, tool.name, job_id, subject, args)
        call = self.hub.build_call(tool.name, args, subject=subject, job_id=job_id)
        return probe, self._send(call.method, call.path_with_query, call.headers, call.body, probe)

    def endpoint(self, target: str, send: Callable[[ExerciseProbe], HubResponse],
                 expect: Callable[[HubResponse], str | None]) -> bool:
        """The catalog fetch or the authorization probe: the package's endpoint must answer."""
        probe = ExerciseProbe("fetch")
        response = send(probe)
        if probe.reached_view:
            problem = expect(response)
            if problem is None:
                self.add(target, "fetch", "pass", f"answered by bailing_flask: HTTP {response.status}")
                return True
            self.add(target, "fetch", "fail", problem)
            return False
        culprit, fix = self._culprit(probe, response)
        self.add(target, "fetch", "fail", f"the hub's request got {self._answer(response)}",
                 culprit, fix)
        return False

    def catalog(self) -> dict[str, Any]:
        served: dict[str, Any] = catalog_of(self.state).served
        self.hub._document = served
        path = self.hub.catalog_path

        def send(probe: ExerciseProbe) -> HubResponse:
            return self._send("GET", path, catalog_headers(self.hub.secret, path), b"", probe)

        def expect(response: HubResponse) -> str | None:
            return None if response.status == 200 else f"HTTP {response.status}: {self._answer(response)}"

        self.endpoint("catalog", send, expect)
        return served  # go on with the catalog the app serves, whatever stood in the way

    def authz_probe(self) -> None:
        def send(probe: ExerciseProbe) -> HubResponse:
            path = self.state.config.probe_path
            headers = signed_headers(self.hub.secret, "POST", path, PROBE_BODY, subject=PROBE_SUBJECT,
                                     job_id="probe", client="__probe__", tool_scope="__probe__.authz")
            headers["Content-Type"] = "application/json"
            return self._send("POST", path, headers, PROBE_BODY.encode(), probe)

        def expect(response: HubResponse) -> str | None:
            try:
                authorized = json.loads(response.body).get("authorized")
            except (ValueError, AttributeError):
                authorized = None
            if response.status == 200 and authorized is False:
                return None
            if authorized is True:
                return ("the probe subject is authorized for some tool: the hub marks this provider "
                        "suspect and alerts its operator")
            return f"unexpected answer {self._answer(response)}"

        self.endpoint("authz_probe", send, expect)

    def tool(self, tool: CompiledTool, operation: dict[str, Any]) -> None:
        target = f"tool {tool.name} ({tool.method} {tool.path})"
        args = sample_arguments(operation)
        registered = self._tool(tool)
        unroutable = None if registered is None else unroutable_sample(self.app, registered, args)
        if unroutable is not None:
            self.add(target, "probe", "warn",
                     f"not exercised: the exercise's sample value {unroutable}, so its requests would "
                     "not reach the route (the hub's do, with a value the route accepts)",
                     None,
                     "tell the model which values route: Param(..., location=\"path\", "
                     "type={\"type\": \"string\", \"pattern\": ...}) (or an enum); "
                     + (f"see its answer with a real value: flask bailing call {tool.name} '{{...}}' "
                        "--subject ..." if tool.readonly else
                        "the exercise cannot pick a value for it (flask bailing call would run the write)"))
            self.cache_keys_check(target, tool)  # what the decorators key on needs no request
            return
        self.probe_check(target, tool, args)
        if self.probe_only:
            return
        self.stack_check(target, tool, args)
        unsigned_check(self, target, tool, args)
        if self.subject and tool.readonly:
            first = self.subject_check(target, tool, args)
            reads_check(self, target, tool, first[0])
            if self.other:
                self.second_subject_check(target, tool, args, first)
                return
        self.cache_keys_check(target, tool)

    def probe_check(self, target: str, tool: CompiledTool, args: dict[str, Any]) -> None:
        probe, response = self.send("probe", tool, args, PROBE_SUBJECT)
        if probe.gate == "refused" and response.status == probe.status \
                and response.headers.get(REASON_HEADER) == probe.reason:
            note = ""
            if probe.reason in ("invalid_parameter", "unknown_parameter", "invalid_body"):
                note = " (before authorization: the exercise's sample arguments were refused)"
            self.add(target, "probe", "pass",
                     f"the gate refused the probe subject: {response.status} {probe.reason}{note}")
            return
        if probe.gate == "refused":
            hook = self.watch.rewritten.get(id(probe))
            culprit = (f"after_request function {_qualname(hook)} rewrote it" if hook is not None
                       else "an after_request function or error handler rewrote the gate's answer")
            self.add(target, "probe", "fail",
                     f"the gate refused with {probe.status} {probe.reason} (the view did not run), but "
                     f"the response became {self._answer(response)}: the hub reads that answer while "
                     "the audit records the refusal, so the two disagree",
                     culprit, "leave responses that carry X-Bailing-Reason alone (return them unchanged)")
            return
        if probe.gate == "admitted":
            self.add(target, "probe", "fail",
                     f"the authorizer ADMITTED the probe subject {PROBE_SUBJECT!r} (the view was not run)",
                     "the authorizer", "refuse subjects the subject loader does not know "
                     "(call.user is None -> False); the hub's own probe would call this suspect")
            return
        culprit, fix = self._culprit(probe, response)
        self.add(target, "probe", "fail", f"the hub's call got {self._answer(response)}", culprit, fix)

    def stack_check(self, target: str, tool: CompiledTool, args: dict[str, Any]) -> None:
        subject = self.subject or PROBE_SUBJECT
        probe, response = self.send("stack", tool, args, subject)
        if probe.gate == "admitted" and not probe.unguarded:
            self.stacks_ran.add(tool.name)
        if probe.reached_view:
            registered = self._tool(tool)
            approved = (" (business_approval: with an approval the exercise gave its own request, in "
                        "its throwaway store)") if registered is not None \
                and registered.options.business_approval else ""
            self.add(target, "stack", "pass",
                     f"an admitted call as {subject!r} passes the view's decorators (they ran; the view "
                     f"itself was stopped where it would start){approved}")
            return
        if probe.unguarded:
            self.add(target, "stack", "warn",
                     "@tool sits above the route decorator: the decorators below it cannot be "
                     "exercised without running the view", None,
                     "put @tool right below the route decorator")
            return
        if probe.gate == "refused" and probe.reason == "forbidden":
            self.add(target, "stack", "warn",
                     f"not exercised: the authorizer refused {subject!r} ({probe.status} {probe.reason}); "
                     "the view's decorators did not run", None,
                     "pass --subject with a user the authorizer admits for this tool")
            return
        if probe.gate == "refused":
            sample = probe.reason in ("invalid_parameter", "unknown_parameter", "invalid_body")
            named = ", ".join(map(str, response.json().get("parameters") or [])) if sample else ""
            self.add(target, "stack", "warn",
                     f"not exercised: the gate refused the sample call ({probe.status} {probe.reason}"
                     f"{': ' + named if named else ''})", None,
                     "the exercise's sample arguments do not meet the declaration (a pattern, a format): "
                     "--subject does not change them" if sample else
                     "pass --subject with a real user, or see the arguments the tool declares")
            return
        reason = response.headers.get(REASON_HEADER)
        if reason == "login_required" and subject == PROBE_SUBJECT:
            self.add(target, "stack", "warn",
                     "login_required refused the unknown probe subject (403 login_required, through "
                     "the Flask-Login or Flask-HTTPAuth bridge); pass --subject to exercise the rest of "
                     "the view's stack")
            return
        if reason == "role_required":
            self.add(target, "stack", "warn",
                     f"Flask-HTTPAuth's login_required(role=...) refused {subject!r} (403 role_required, "
                     "through the bridge): the rest of the view's stack was not exercised", None,
                     "pass --subject with a user that has the role the view asks for")
            return
        if reason == "fresh_login_required":
            self.add(target, "stack", "fail",
                     "fresh_login_required refuses every hub call (403 fresh_login_required): this tool "
                     "can never succeed through the hub",
                     "Flask-Login's fresh_login_required",
                     "remove fresh_login_required from this tool's view, or do not expose it as a tool "
                     "(use approval_required=True for a second look)")
            return
        culprit, fix = self._culprit(probe, response)
        self.add(target, "stack", "fail", f"the admitted call got {self._answer(response)}", culprit, fix)

    def subject_check(self, target: str, tool: CompiledTool, args: dict[str, Any]
                      ) -> tuple[ExerciseProbe, HubResponse]:
        probe, response = self.send("subject", tool, args, self.subject)
        refused_in_view = response.headers.get(REASON_HEADER) if probe.gate == "admitted" else None
        if refused_in_view == "role_required":
            self.add(target, "subject", "warn",
                     f"the authorizer admitted {self.subject!r}, then Flask-HTTPAuth's "
                     "login_required(role=...) refused it (403 role_required): the hub's probe counts "
                     "this user as allowed, and every call fails", None,
                     "let the authorizer refuse the users the view's role check refuses")
        elif refused_in_view == "login_required":
            self.add(target, "subject", "warn",
                     f"the authorizer admitted {self.subject!r} without a user (the subject loader "
                     "returned None), then login_required refused it (403 login_required)", None,
                     "return the subject's user from the subject loader, or let the authorizer "
                     "refuse calls without one")
        elif probe.reached_view:
            self.views_ran.append(f"{tool.name} as {self.subject!r}")
            status: Status = "pass" if 200 <= response.status < 300 else "warn"
            self.add(target, "subject", status, f"the view ran for {self.subject!r}: {self._answer(response)}")
        elif probe.gate == "refused":
            self.add(target, "subject", "warn",
                     f"the gate refused {self.subject!r}: {probe.status} {probe.reason}", None,
                     "check the subject and the authorizer (an async authorizer needs flask[async])")
        else:
            culprit, fix = self._culprit(probe, response)
            self.add(target, "subject", "fail", f"the call as {self.subject!r} got {self._answer(response)}",
                     culprit, fix)
        return probe, response

    def _tool(self, tool: CompiledTool) -> Any:
        return next((t for t in registry_of(self.state).tools if t.name == tool.name), None)

    def _cache_culprit(self, tool: CompiledTool) -> tuple[str, str]:
        registered = self._tool(tool)
        layers = cache_layers(self.app, registered.endpoint, registered.method) if registered else []
        shared = [layer for layer in layers if layer.per_subject is not True] or layers
        if shared:
            return "; ".join(layer.describe() for layer in shared), shared[0].fix
        return ("something between the route and @tool that answers without calling the view (a cache?)",
                "key whatever caches this view on the acting subject (bailing_flask.cache_key for "
                "Flask-Caching), or keep caching out of tool views")

    def second_subject_check(self, target: str, tool: CompiledTool, args: dict[str, Any],
                             first: tuple[ExerciseProbe, HubResponse]) -> None:
        """The same read-only call as a second subject: its view must run, not answer the first's bytes."""
        probe, response = self.send("subject", tool, args, self.other)
        if probe.reached_view:
            self.views_ran.append(f"{tool.name} as {self.other!r}")
            self.add(target, "cache", "pass",
                     f"the view ran for {self.other!r} too: no answer of {self.subject!r} was reused")
            return
        if probe.gate == "refused":
            self.add(target, "cache", "warn",
                     f"the gate refused {self.other!r} ({probe.status} {probe.reason}): not compared", None,
                     "pass as the second --subject a user the authorizer admits for this tool")
            return
        if probe.gate == "admitted" and 200 <= response.status < 300:
            same = response.body == first[1].body
            culprit, fix = self._cache_culprit(tool)
            self.add(target, "cache", "fail",
                     f"{self.other!r} was answered {response.status} without the view running"
                     + (f", with the very bytes {self.subject!r} got" if same else "")
                     + ": one subject's answer served to another (another tenant's, where they differ)",
                     culprit, fix)
            return
        culprit, fix = self._culprit(probe, response)
        self.add(target, "cache", "fail", f"the call as {self.other!r} got {self._answer(response)}",
                 culprit, fix)

    def cache_keys_check(self, target: str, tool: CompiledTool) -> None:
        """Without a second subject: what each Flask-Caching decorator in front of the view keys on."""
        registered = self._tool(tool)
        if registered is None:
            return
        for layer in cache_layers(self.app, registered.endpoint, registered.method):
            if layer.per_subject is True:
                self.add(target, "cache", "pass", f"{layer.describe()}: one entry per acting subject")
            elif layer.per_subject is False:
                self.add(target, "cache", "warn",
                         f"{layer.describe()} is not keyed on the subject: unless this tool answers the same "
                         "to everyone, the answer cached for the first authorized subject is served, "
                         "without the view running, to every other one (pass --subject twice to see it)",
                         layer.describe(), layer.fix)
            else:
                self.add(target, "cache", "warn",
                         f"{layer.describe()}: whether its key tells subjects apart is not known", None,
                         "pass --subject twice (two users, of two tenants) to see it, or "
                         + layer.fix)

    def loader_checks(self) -> None:
        """What the subject loader returned: never a user for the probe subject; one Flask-Login takes."""
        loader = getattr(self.state.callbacks.subject_loader_func, "__wrapped__", self.state.callbacks.subject_loader_func)
        if loader is None:
            return
        name = code_name(loader)
        probed = [user for subject, user in self.watch.loaded if subject == PROBE_SUBJECT and user is not None]
        if probed:
            self.add("subject_loader", "loader", "fail",
                     f"the subject loader returned a value of type {type(probed[0]).__name__} for the "
                     f"probe subject {PROBE_SUBJECT!r}: a loader that creates the users it does not know makes the "
                     "probe subject a user, and the hub's own probe then marks this provider suspect",
                     f"subject loader {name}",
                     "return None for a subject you do not know (provision users elsewhere, never from "
                     "the subject loader)")
        bridged = any(getattr(getattr(hook, "__self__", None), "loader_problem", None)
                      for hook in self.state.callbacks.admission_hooks)
        if bridged:
            for subject, user in self.watch.loaded:
                problem = login_user_problem(loader, user)
                if problem:
                    self.add("subject_loader", "loader", "fail",
                             f"for {subject!r}: {problem}; every call through login_required is refused "
                             "(500 login_user_invalid)", f"subject loader {name}",
                             "return the objects your login_manager.user_loader returns")
                    break

    def ran_summary(self, notes: list[str]) -> list[str]:
        """What of the app's code ran, said plainly (never "nothing ran" when something did)."""
        lines = ["what of this app's code ran:"]
        hooks = [f"{name} ({count}x)" for name, count in self.watch.hooks_ran.items()]
        lines.append("  hooks: " + (", ".join(hooks) if hooks else "none"))
        lines.append(f"  subject loader: {len(self.watch.loaded)} call(s); authorizer: "
                     f"{self.watch.authorized} call(s)")
        lines.append("  view stacks (the decorators in front of the view) of: " + (
            ", ".join(sorted(self.stacks_ran)) if self.stacks_ran else "none"))
        lines.append("  views: " + (", ".join(self.views_ran) if self.views_ran
                                    else "none (no view was run)"))
        for database in self.databases:
            if database.rolled_back:
                lines.append(f"  {database.name}: every write was rolled back")
        lines.extend(f"  {note}" for note in notes)
        lines.extend(f"  {database.describe()}" for database in self.databases
                     if not database.rolled_back and database.describe() not in " ".join(notes))
        return lines

    def run(self, on_plan: Callable[[str], None] | None = None) -> ExerciseReport:
        self.report.plan = self.plan()
        if on_plan is not None:
            on_plan("\n".join(self.report.plan))
        with self.watch.installed(), rolled_back(self.app, self.databases) as notes, \
                recording(self.app, self.buckets, self.unrun), recording_reads(self.app, self.reads):
            document = self.catalog()
            self.authz_probe()
            for tool in compile_tools(document):
                operation = document["paths"][tool.path][tool.method.lower()]
                self.tool(tool, operation)
            limiter_check(self, document)
        self.loader_checks()
        for excluded in catalog_of(self.state).excluded:
            self.add(excluded, "probe", "warn", "not served (it has errors, see above): not exercised")
        self.report.ran = self.ran_summary(notes)
        return self.report


def run_exercise(app: Flask, *, subject: str | Sequence[str] | None = None, secret: str | None = None,
                 probe_only: bool = False, on_plan: Callable[[str], None] | None = None,
                 https: bool | None = None) -> ExerciseReport:
    """Send the hub's requests to every declared tool of ``app``, in process; report who answered.

    :param subject: a real subject: exercise the view's decorators as this
        user, and call every read-only tool as this user (the view runs). Two
        subjects (best of two tenants): each read-only tool is called as both,
        and an answer the second got without its view running is reported.
    :param secret: the provider secret (default: the app's first one).
    :param probe_only: send only the probe requests (the gate refuses them):
        no decorator of a view and no view runs.
    :param on_plan: called, before anything is sent, with what of the app's
        code will run and on which databases (``report.plan``, as text).
    :param https: send the requests as arriving over HTTPS (behind TLS);
        the default follows the scheme of ``BAILING_BASE_URL`` (see
        :class:`~bailing_flask.testing.HubSimulator`). The hub signs only
        the path and query: the scheme changes what the app's hooks see
        (an HTTPS-only app redirects ``http``), never the signature.

    Only the exercise's own requests see its throwaway de-duplication store
    and the ``allow_unsigned`` flag of its ``unsigned`` check (each request
    is sent in a context of its own). What it still changes for the whole
    process while it runs, and puts back afterwards: the app's
    ``before_request``, ``after_request`` and ``teardown_request`` lists
    (the last with Flask-Limiter or a ``DBAPITransaction``), its request class, the
    subject loader and authorizer, Flask-Login's ``unauthorized`` and
    ``needs_refresh``, Flask-HTTPAuth's ``authenticate`` methods, an
    admission hook and receivers of ``tool_denied`` and Flask's request
    signals (each of these only records, and only for its own requests),
    and a SQLAlchemy engine's commit, which rolls back in the exercise's own
    requests only. A request served meanwhile keeps the app's behaviour,
    but the lists change under it: run it in a process that serves no
    traffic.
    """
    from bailing_flask._state import state_of

    secret = secret or primary_secret(state_of(app).config.secrets)
    if secret is None:
        raise ConfigurationError("the exercise signs like the hub: set BAILING_SECRETS")
    subjects = [subject] if isinstance(subject, str) else list(subject or ())
    return _Exercise(app, secret, subjects, probe_only, https).run(on_plan)
