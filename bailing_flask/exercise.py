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
    authorizer admits it, nothing runs and that is reported.
``stack``
    The same request, admitted by the gate *without* asking the authorizer,
    so the view's own decorators (``login_required``,
    ``MethodView.decorators``, caches) run as for a real call. The declared
    view is never called: where it would run, the exercise stops.
``subject``
    With ``--subject``, a real subject on every read-only tool: the view
    runs, and must be reached.

No view with a side effect ever runs. Anything else that answered is named
(the ``before_request`` function, found by watching each one; the redirect
target; the extension) with how to fix it. The hooks of the app and its
Flask-Login manager are watched only for the duration of the run: do not
run it in a process that serves traffic.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from flask import Flask, current_app, got_request_exception, request

from bailing_flask._pipeline.samples import sample_arguments
from bailing_flask.errors import ConfigurationError
from bailing_flask._pipeline.gate import EXERCISE_KEY, ExerciseProbe
from bailing_flask.lint import CompiledTool, compile_tools
from bailing_flask.responses import REASON_HEADER
from bailing_flask.settings import provider_secrets
from bailing_flask.wire.signing import primary_secret
from bailing_flask.testing import PROBE_BODY, PROBE_SUBJECT, HubResponse, HubSimulator, catalog_headers, signed_headers

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
    #: ``fetch``, ``probe``, ``stack``, ``subject`` or ``config``
    check: str
    status: Status
    summary: str
    #: who answered instead of the package, when it can be named
    culprit: str | None = None
    fix: str | None = None


@dataclass
class ExerciseReport:
    results: list[ExerciseResult] = field(default_factory=list)

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
        counts = {s: sum(1 for r in self.results if r.status == s) for s in ("pass", "warn", "fail")}
        lines.append(f"exercise: {counts['pass']} passed, {counts['warn']} warning(s), "
                     f"{counts['fail']} failed")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "results": [result.__dict__ for result in self.results]}


def _qualname(func: Any) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"


def _extension_of(func: Any) -> str | None:
    module = str(getattr(func, "__module__", "") or "")
    return _EXTENSIONS.get(module.split(".", 1)[0])


class _Watch:
    """Watches the app's ``before_request`` functions, Flask-Login and exceptions for one run."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.exceptions: dict[int, BaseException] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Watch]:
        app = self.app
        saved = {key: list(funcs) for key, funcs in app.before_request_funcs.items()}
        manager = getattr(app, "login_manager", None)
        patched: dict[str, Any] = {}
        for key, funcs in saved.items():
            app.before_request_funcs[key] = [self._watched(func, key) for func in funcs]
        if manager is not None:
            for name in ("unauthorized", "needs_refresh"):
                patched[name] = manager.__dict__.get(name)
                setattr(manager, name, self._flask_login(getattr(manager, name), name))
        got_request_exception.connect(self._exception, app)
        try:
            yield self
        finally:
            got_request_exception.disconnect(self._exception, app)
            for key, funcs in saved.items():
                app.before_request_funcs[key] = funcs
            for name, original in patched.items():
                if original is None:
                    delattr(manager, name)
                else:
                    setattr(manager, name, original)

    @staticmethod
    def _probe() -> ExerciseProbe | None:
        probe = request.environ.get(EXERCISE_KEY)
        return probe if isinstance(probe, ExerciseProbe) else None

    def _watched(self, func: Callable[..., Any], blueprint: str | None) -> Callable[..., Any]:
        def watched() -> Any:
            try:
                answer = current_app.ensure_sync(func)()
            except BaseException as exc:
                probe = self._probe()
                if probe is not None and probe.hook is None:
                    probe.hook = (func, exc)
                raise
            if answer is not None:
                probe = self._probe()
                if probe is not None and probe.hook is None:
                    probe.hook = (func, None)
            return answer

        watched.__bailing_blueprint__ = blueprint  # type: ignore[attr-defined]
        watched.__wrapped__ = func  # type: ignore[attr-defined]
        return watched

    def _flask_login(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            probe = self._probe()
            if probe is not None and probe.flask_login is None:
                probe.flask_login = name
            return original(*args, **kwargs)

        return watched

    def _exception(self, sender: Any, exception: BaseException, **extra: Any) -> None:
        probe = self._probe()
        if probe is not None:
            self.exceptions[id(probe)] = exception


class _Exercise:
    def __init__(self, app: Flask, secret: str, subject: str | None) -> None:
        from bailing_flask._state import state_of

        self.app = app
        self.state = state_of(app)
        self.subject = subject
        self.hub = HubSimulator(app, secret, client="__probe__")
        self.report = ExerciseReport()
        self.watch = _Watch(app)
        self.job = "exercise-" + uuid.uuid4().hex[:16]

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.report.results.append(ExerciseResult(*args, **kwargs))

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
            extension = _extension_of(original)
            if extension == "Flask-WTF's CSRFProtect":
                fix = ("bailing_flask exempts verified tool calls from CSRFProtect when "
                       "BAILING_CSRF_EXEMPT is on (the default) and the CSRFProtect is the one in "
                       "app.extensions['csrf']; browsers stay checked")
            elif extension == "Flask-Limiter":
                fix = ("key the limiter on the acting subject: Limiter(key_func=bailing_flask.rate_limit_key); "
                       "in process every request comes from one address")
            elif extension is not None:
                fix = f"make {extension} step aside for hub calls (bailing_flask.is_hub_request())"
            else:
                fix = (f"make it step aside for hub requests with {_IS_HUB_REQUEST} as its first line; "
                       "the gate still checks the signature, subject, arguments and authorization")
            return f"{extension + ': ' if extension else ''}{where} {how}", fix
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
        if exception is not None:
            return (f"the request raised {type(exception).__name__}: {str(exception)[:160]}",
                    "see the traceback in the log")
        if status in (301, 302, 303, 307, 308):
            return (f"a redirect to {response.headers.get('Location')}",
                    "serve the tool at exactly its catalog path: the hub follows redirects and re-sends "
                    "the signature for another path, which cannot verify (301/302/303 also turn a POST "
                    "into a GET)")
        if status in (404, 405):
            return (f"routing answered {status} before any view",
                    "the hub requests base_url + the catalog path with this method; check SERVER_NAME, "
                    "subdomain rules and before_request functions that abort")
        if probe.mode == "stack" and 200 <= status < 300:
            cache = " (Flask-Caching's cache.cached?)" if "cache" in self.app.extensions else ""
            return (f"something between the route and @tool answered {status} without calling the "
                    f"view: a cached response{cache}",
                    "a response cached by path is one subject's data served to another: key the cache "
                    "on the subject, or keep caching out of tool views")
        return (f"something other than bailing_flask answered: {self._answer(response)}",
                "find what answers this path before the view (after_request functions and error "
                "handlers included)")

    # -- the checks -----------------------------------------------------------------------

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes,
              probe: ExerciseProbe) -> HubResponse:
        # each request in a fresh context: under `flask bailing ...` an app context is
        # already pushed, and requests would share its `g` (Flask-Login keeps its user there)
        return contextvars.Context().run(
            self.hub.send, method, target, headers, body, None, environ={EXERCISE_KEY: probe})

    def send(self, mode: str, tool: CompiledTool, args: dict[str, Any], subject: str | None
             ) -> tuple[ExerciseProbe, HubResponse]:
        probe = ExerciseProbe(mode)
        call = self.hub.build_call(tool.name, args, subject=subject, job_id=self.job)
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
        served: dict[str, Any] = self.state.catalog().served
        self.hub._document = served
        if not self.state.config("BAILING_CATALOG_PATH"):
            return served  # this app serves no catalog (the hub gets it inline)
        path = self.hub.catalog_path

        def send(probe: ExerciseProbe) -> HubResponse:
            return self._send("GET", path, catalog_headers(self.hub.secret, path), b"", probe)

        def expect(response: HubResponse) -> str | None:
            return None if response.status == 200 else f"HTTP {response.status}: {self._answer(response)}"

        self.endpoint("catalog", send, expect)
        return served  # go on with the catalog the app serves, whatever stood in the way

    def authz_probe(self) -> None:
        if not self.state.config("BAILING_PROBE_PATH"):
            return

        def send(probe: ExerciseProbe) -> HubResponse:
            path = self.state.config("BAILING_PROBE_PATH")
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
        self.probe_check(target, tool, args)
        self.stack_check(target, tool, args)
        if self.subject and tool.readonly:
            self.subject_check(target, tool, args)

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
            self.add(target, "probe", "fail",
                     f"the gate refused with {probe.status} {probe.reason}, but the response became "
                     f"{self._answer(response)}",
                     "an after_request function or error handler rewrote the gate's answer",
                     "leave responses that carry X-Bailing-Reason alone")
            return
        if probe.gate == "admitted":
            self.add(target, "probe", "fail",
                     f"the authorizer ADMITTED the probe subject {PROBE_SUBJECT!r} (nothing was run)",
                     "the authorizer", "refuse subjects the subject loader does not know "
                     "(call.user is None -> False); the hub's own probe would call this suspect")
            return
        culprit, fix = self._culprit(probe, response)
        self.add(target, "probe", "fail", f"the hub's call got {self._answer(response)}", culprit, fix)

    def stack_check(self, target: str, tool: CompiledTool, args: dict[str, Any]) -> None:
        subject = self.subject or PROBE_SUBJECT
        probe, response = self.send("stack", tool, args, subject)
        if probe.reached_view:
            self.add(target, "stack", "pass",
                     f"an admitted call as {subject!r} passes the view's decorators (the view was not run)")
            return
        if probe.unguarded:
            self.add(target, "stack", "warn",
                     "@tool sits above the route decorator: the decorators below it cannot be "
                     "exercised without running the view", None,
                     "put @tool right below the route decorator")
            return
        if probe.gate == "refused":
            self.add(target, "stack", "warn",
                     f"not exercised: the gate refused the sample call ({probe.status} {probe.reason})",
                     None, "pass --subject with a real user, or see the arguments the tool declares")
            return
        reason = response.headers.get(REASON_HEADER)
        if reason == "login_required" and subject == PROBE_SUBJECT:
            self.add(target, "stack", "warn",
                     "login_required refused the unknown probe subject (403 login_required, through "
                     "the Flask-Login bridge); pass --subject to exercise the rest of the view's stack")
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

    def subject_check(self, target: str, tool: CompiledTool, args: dict[str, Any]) -> None:
        probe, response = self.send("subject", tool, args, self.subject)
        if probe.reached_view:
            status: Status = "pass" if 200 <= response.status < 300 else "warn"
            self.add(target, "subject", status, f"the view ran for {self.subject!r}: {self._answer(response)}")
            return
        if probe.gate == "refused":
            self.add(target, "subject", "warn",
                     f"the gate refused {self.subject!r}: {probe.status} {probe.reason}", None,
                     "check the subject and the authorizer (an async authorizer needs flask[async])")
            return
        culprit, fix = self._culprit(probe, response)
        self.add(target, "subject", "fail", f"the call as {self.subject!r} got {self._answer(response)}",
                 culprit, fix)

    def limiters(self) -> None:
        for limiter in self.app.extensions.get("limiter") or ():
            key = getattr(limiter, "_key_func", None)
            if getattr(key, "__name__", None) == "get_remote_address":
                self.add("limiter", "config", "fail",
                         "Flask-Limiter keys on the remote address: every hub call comes from the hub's "
                         "address, so all of the hub's users share one bucket",
                         "Flask-Limiter (key_func=get_remote_address)",
                         "Limiter(key_func=bailing_flask.rate_limit_key): one bucket per acting subject "
                         "for tool calls, the remote address for everything else")

    def run(self) -> ExerciseReport:
        with self.watch.installed():
            document = self.catalog()
            self.authz_probe()
            for tool in compile_tools(document):
                operation = document["paths"][tool.path][tool.method.lower()]
                self.tool(tool, operation)
        for excluded in self.state.catalog().excluded:
            self.add(excluded, "probe", "warn", "not served (it has errors, see above): not exercised")
        self.limiters()
        return self.report


def run_exercise(app: Flask, *, subject: str | None = None, secret: str | None = None) -> ExerciseReport:
    """Send the hub's requests to every declared tool of ``app``, in process; report who answered.

    :param subject: a real subject: exercise the view's decorators as this
        user, and call every read-only tool as this user (the view runs).
    :param secret: the provider secret (default: the app's first one).
    """
    secret = secret or primary_secret(provider_secrets(app.config))
    if secret is None:
        raise ConfigurationError("the exercise signs like the hub: set BAILING_SECRETS")
    return _Exercise(app, secret, subject).run()
