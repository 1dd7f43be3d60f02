"""The exercise's ``unsigned`` check: does ``@tool`` cut off clients the route already serves?

A route that becomes a tool refuses every unsigned request (``401
missing_signature``) unless it is declared ``allow_unsigned=True``. That is
the safe default, and for a route written for the hub it is right; for a
route the app's own clients call (a mobile app with a bearer token, a
browser with a session) it silently cuts them off. The check sends each
such tool two unsigned requests, without credentials and with a dummy
``Authorization: Bearer`` header, through the app's own stack as if
``allow_unsigned=True`` were set for that one request (the gate lets them
through to the view's decorators; the view itself never runs), and reports
what the app's own code would have answered: its own ``401``/``403``
(``login_required``, Flask-HTTPAuth, a ``before_request`` guard), a login
redirect, or the view. Each such route is a warning naming the fix, like
the exercise's other warnings it does not change the exit status: only the
app knows whether the route still has clients of its own. Declaring
``allow_unsigned=False`` says it has none, and the check passes.
"""

from __future__ import annotations

from typing import Any, Protocol

from flask import Flask

from bailing_flask._pipeline.gate import ExerciseProbe
from bailing_flask.exercise._stack import decorators_of
from bailing_flask.lint import CompiledTool
from bailing_flask.testing import HubResponse, HubSimulator

__all__ = ["unsigned_check", "unsigned_plan", "DUMMY_BEARER"]


class _Runner(Protocol):
    """What the check needs of the running exercise (without importing it: it is above)."""

    app: Flask
    hub: HubSimulator
    job: str
    targets: dict[int, tuple[str, str]]
    stacks_ran: set[str]

    def add(self, *args: Any, **kwargs: Any) -> None: ...

    def _culprit(self, probe: ExerciseProbe, response: HubResponse) -> tuple[str, str]: ...

    def _send(self, method: str, target: str, headers: dict[str, str], body: bytes,
              probe: ExerciseProbe) -> HubResponse: ...

    def _tool(self, tool: CompiledTool) -> Any: ...

#: what the second request carries: the shape of a client's token, never a real one
DUMMY_BEARER = "Bearer bailing-exercise-not-a-real-token"
_FIX = ("if the route's existing clients must keep working, declare it @tool(..., allow_unsigned=True): "
        "unsigned requests then reach the view through the app's own authentication as before, and "
        "signed calls are still verified and authorized by the gate; if the route is the hub's alone, "
        "declare allow_unsigned=False to say so")


def unsigned_plan(tools: Any, probe_only: bool) -> list[str]:
    """The plan's line: which tools get the unsigned requests (the same decorators run, no view)."""
    undecided = [tool.name for tool in tools if tool.options.allow_unsigned is None]
    if probe_only or not undecided:
        return []
    return [f"  unsigned requests (two each, the decorators above run, never the view): {', '.join(undecided)}"]


def _answer(response: HubResponse) -> str:
    what = f"HTTP {response.status}"
    if response.status in (301, 302, 303, 307, 308):
        return f"{what} redirect to {response.headers.get('Location')}"
    text = response.text.strip().replace("\n", " ")
    if "text/html" in response.headers.get("Content-Type", "") or text.lower().startswith(("<!doctype", "<html")):
        return what + " (an HTML page)"
    return what + (f" {text[:80]!r}" if text else "")


def _who(ex: _Runner, probe: ExerciseProbe, response: HubResponse) -> str | None:
    """What of the app's own code answered the unsigned request (``None``: nothing of the app's)."""
    if probe.hook is not None:
        return ex._culprit(probe, response)[0]  # the before_request function, by name
    if probe.gate != "admitted":
        return None  # routing, a middleware: nothing that @tool changed
    if probe.reached_view:
        return "the view"
    if probe.flask_login is not None:
        return f"Flask-Login (login_manager.{probe.flask_login}())"
    where = ex.targets.get(id(probe))
    decorators = decorators_of(ex.app, *where) if where is not None else []
    return "the view's decorators" + (f" ({', '.join(decorators)})" if decorators else "")


def _send(ex: _Runner, tool: CompiledTool, args: dict[str, Any], authorization: str | None
          ) -> tuple[ExerciseProbe, HubResponse]:
    call = ex.hub.build_call(tool.name, args, job_id=ex.job)
    headers = {name: value for name, value in call.headers.items() if name.lower() == "content-type"}
    if authorization is not None:
        headers["Authorization"] = authorization
    probe = ExerciseProbe("unsigned")
    registered = ex._tool(tool)
    if registered is not None:
        ex.targets[id(probe)] = (registered.endpoint, registered.method)
    return probe, ex._send(call.method, call.path_with_query, headers, call.body, probe)


def unsigned_check(ex: _Runner, target: str, tool: CompiledTool, args: dict[str, Any]) -> None:
    registered = ex._tool(tool)
    if registered is None:
        return
    chosen = registered.options.allow_unsigned
    if chosen:
        ex.add(target, "unsigned", "pass",
               "allow_unsigned=True: the app's own clients reach the view as before")
        return
    if chosen is False:
        ex.add(target, "unsigned", "pass",
               "allow_unsigned=False: unsigned requests are refused (401 missing_signature), as declared")
        return
    answers = []
    for label, authorization in (("without credentials", None),
                                 ("with an Authorization: Bearer header", DUMMY_BEARER)):
        probe, response = _send(ex, tool, args, authorization)
        if probe.gate == "admitted" and not probe.unguarded:
            ex.stacks_ran.add(tool.name)
        if probe.unguarded:
            ex.add(target, "unsigned", "warn",
                   "@tool sits above the route decorator: what the app answers unsigned requests "
                   "cannot be seen without running the view", None, "put @tool right below the route decorator")
            return
        who = _who(ex, probe, response)
        if who is not None:
            answers.append((label, probe, response, who))
    if not answers:
        ex.add(target, "unsigned", "pass", "nothing of the app's own answers unsigned requests here")
        return
    said = [("reach the declared view: nothing in front of it refuses them (a check inside the view or "
             "below @tool was not run)") if probe.reached_view else f"get {_answer(response)} from {who}"
            for _, probe, response, who in answers]
    if len(said) == 2 and said[0] == said[1]:
        said = [f"without credentials and with an Authorization: Bearer header {said[0]}"]
    else:
        said = [f"{label} {what}" for (label, *_), what in zip(answers, said)]
    guarded = all(probe.hook is not None for _, probe, _, _ in answers)
    now = ("a client whose credentials pass the before_request function now gets 401 missing_signature"
           if guarded else "now bailing_flask answers them 401 missing_signature")
    ex.add(target, "unsigned", "warn",
           f"the app's own clients are cut off: without @tool, unsigned requests {'; '.join(said)}; {now}",
           "@tool without allow_unsigned (a tool route refuses unsigned requests by default)", _FIX)
