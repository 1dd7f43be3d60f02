"""What the exercise watches while it runs: the app's hooks, loader, authorizer, Flask-Login.

Each is replaced for the duration of one run by a wrapper that records
what ran and what answered (by the ``ExerciseProbe`` of the request), and
put back afterwards: the exercise observes the app, it does not change
what the app answers. The gate's decision is observed from outside the
gate, which has no exercise mode: an admission hook added after the app's
own (it runs once everything else admitted the call, and stops an admitted
probe subject before anything of the view's stack runs), the
``tool_denied`` signal for a refusal, and the request's teardown for an
unsigned request let through to the view's stack. Flask-HTTPAuth's objects are not known to the
package (one is only found in a view's decorators), so the ``authenticate``
method of its classes is watched instead, if the app imported it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from flask import Flask, current_app, got_request_exception, request, request_tearing_down

from bailing_flask._pipeline.gate import EXERCISE_KEY, GATE_KEY, ExerciseProbe, ExerciseStop
from bailing_flask.signals import tool_denied
from bailing_flask._sync import call_sync
from bailing_flask.exercise._stack import view_name
from bailing_flask.responses import REASON_HEADER

__all__ = ["_Watch"]


def _qualname(func: Any) -> str:
    return view_name(func)


class _Watch:
    """Watches the app's hooks, loader, authorizer, Flask-Login and exceptions for one run."""

    def __init__(self, app: Flask, ext: Any) -> None:
        self.app = app
        self.ext = ext
        self.exceptions: dict[int, BaseException] = {}
        #: ``id(probe)`` -> the after_request function that rewrote the gate's refusal
        self.rewritten: dict[int, Any] = {}
        #: name -> how many times it ran (before_request and after_request functions)
        self.hooks_ran: dict[str, int] = {}
        #: ``(subject, user)`` of every call of the subject loader
        self.loaded: list[tuple[str, Any]] = []
        self.authorized = 0
        #: ``id(probe)`` -> the Flask-HTTPAuth object whose ``login_required`` authenticated it
        #: (with what its ``authenticate`` returned)
        self.httpauth: dict[int, tuple[Any, Any]] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Watch]:
        app, ext = self.app, self.ext
        saved: dict[Any, list[Any]] = {key: list(funcs) for key, funcs in app.before_request_funcs.items()}
        saved_after: dict[Any, list[Any]] = {key: list(f) for key, f in app.after_request_funcs.items()}
        before_funcs: dict[Any, list[Any]] = app.before_request_funcs
        after_funcs: dict[Any, list[Any]] = app.after_request_funcs
        saved_ext = (ext.subject_loader_func, ext.authorizer_func)
        manager = getattr(app, "login_manager", None)
        patched: dict[str, Any] = {}
        for key, funcs in saved.items():
            before_funcs[key] = [self._watched(func, key) for func in funcs]
        for key, funcs in saved_after.items():
            after_funcs[key] = [self._watched_after(func) for func in funcs]
        if ext.subject_loader_func is not None:
            ext.subject_loader_func = self._loader(ext.subject_loader_func)
        if ext.authorizer_func is not None:
            ext.authorizer_func = self._authorizer(ext.authorizer_func)
        if manager is not None:
            for name in ("unauthorized", "needs_refresh"):
                patched[name] = manager.__dict__.get(name)
                setattr(manager, name, self._flask_login(getattr(manager, name), name))
        got_request_exception.connect(self._exception, app)
        # for any sender, and so disconnected whole: a signal left with a receiver costs every call
        tool_denied.connect(self._denied)
        request_tearing_down.connect(self._torn_down)
        ext.admission_hooks.append(self._admitted)
        try:
            with self._httpauth_watched():
                yield self
        finally:
            ext.admission_hooks.remove(self._admitted)
            request_tearing_down.disconnect(self._torn_down)
            tool_denied.disconnect(self._denied)
            got_request_exception.disconnect(self._exception, app)
            for key, funcs in saved.items():
                before_funcs[key] = funcs
            for key, funcs in saved_after.items():
                after_funcs[key] = funcs
            ext.subject_loader_func, ext.authorizer_func = saved_ext
            for name, original in patched.items():
                if original is None:
                    delattr(manager, name)
                else:
                    setattr(manager, name, original)

    @staticmethod
    def _probe() -> ExerciseProbe | None:
        probe = request.environ.get(EXERCISE_KEY)
        return probe if isinstance(probe, ExerciseProbe) else None

    def _admitted(self, call: Any) -> None:
        """The exercise's admission hook, after the app's own: the gate admitted this call."""
        probe = self._probe()
        if probe is not None:
            probe.gate = "admitted"
            if probe.mode == "probe":  # the probe subject was admitted: nothing of the view's stack runs
                raise ExerciseStop()

    def _denied(self, sender: Any, reason: str | None = None, status: int | None = None,
                **extra: Any) -> None:
        probe = self._probe() if sender is self.app else None
        if probe is not None:
            probe.gate, probe.reason, probe.status = "refused", reason, status

    def _torn_down(self, sender: Any, **extra: Any) -> None:
        probe = self._probe() if sender is self.app else None
        if probe is not None and probe.gate is None and request.environ.get(GATE_KEY) is not None:
            probe.gate = "admitted"  # an unsigned request let through (no admission hook runs for it)

    def _ran(self, func: Any, blueprint: str | None = None) -> None:
        name = _qualname(func) + (f" (blueprint {blueprint!r})" if blueprint else "")
        self.hooks_ran[name] = self.hooks_ran.get(name, 0) + 1

    def _watched(self, func: Callable[..., Any], blueprint: str | None) -> Callable[..., Any]:
        def watched() -> Any:
            if not _is_package(func):
                self._ran(func, blueprint)
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

    def _watched_after(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def watched(response: Any) -> Any:
            if not _is_package(func):
                self._ran(func)
            reason = response.headers.get(REASON_HEADER)
            status = response.status_code
            answer = current_app.ensure_sync(func)(response)
            probe = self._probe()
            if (probe is not None and reason is not None and id(probe) not in self.rewritten
                    and (answer.status_code != status or answer.headers.get(REASON_HEADER) != reason)):
                self.rewritten[id(probe)] = func
            return answer

        watched.__wrapped__ = func  # type: ignore[attr-defined]
        return watched

    def _loader(self, loader: Callable[[str], Any]) -> Callable[[str], Any]:
        def watched(subject: str) -> Any:
            user = call_sync(loader, subject)
            self.loaded.append((subject, user))
            return user

        watched.__wrapped__ = loader  # type: ignore[attr-defined]
        return watched

    def _authorizer(self, authorizer: Callable[..., Any]) -> Callable[..., Any]:
        def watched(call: Any) -> Any:
            self.authorized += 1
            return call_sync(authorizer, call)

        watched.__wrapped__ = authorizer  # type: ignore[attr-defined]
        return watched

    def _flask_login(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        def watched(*args: Any, **kwargs: Any) -> Any:
            probe = self._probe()
            if probe is not None and probe.flask_login is None:
                probe.flask_login = name
            return original(*args, **kwargs)

        return watched

    @contextlib.contextmanager
    def _httpauth_watched(self) -> Iterator[None]:
        """Flask-HTTPAuth's ``authenticate`` methods (every class that defines one), for one run."""
        module = sys.modules.get("flask_httpauth")
        base = getattr(module, "HTTPAuth", None)
        classes: list[type] = []
        pending = [base] if isinstance(base, type) else []
        while pending:
            cls = pending.pop()
            classes.append(cls)
            pending.extend(cls.__subclasses__())
        watched = [(cls, cls.__dict__["authenticate"]) for cls in classes if "authenticate" in cls.__dict__]
        for cls, original in watched:
            setattr(cls, "authenticate", self._authenticate(original))
        try:
            yield
        finally:
            for cls, original in watched:
                setattr(cls, "authenticate", original)

    def _authenticate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def watched(auth: Any, *args: Any, **kwargs: Any) -> Any:
            user = original(auth, *args, **kwargs)
            probe = self._probe()
            if probe is not None and id(probe) not in self.httpauth:
                self.httpauth[id(probe)] = (auth, user)
            return user

        watched.__wrapped__ = original  # type: ignore[attr-defined]
        return watched

    def _exception(self, sender: Any, exception: BaseException, **extra: Any) -> None:
        probe = self._probe()
        if probe is not None:
            self.exceptions[id(probe)] = exception


def _is_package(func: Any) -> bool:
    return str(getattr(func, "__module__", "") or "").startswith("bailing_flask")
