"""Flask-Limiter: do two hub users share one bucket? Seen from what the limiter did.

Every hub call comes from the hub's address, so a limiter keyed on the
remote address counts all of the hub's users in one bucket, whatever its
key function is called: ``get_remote_address``, ``lambda:
request.remote_addr``, a function of the app's that reads
``X-Forwarded-For``. So the exercise does not read names: it sends the same
tool two subjects' calls from one address (both refused by the gate, so
nothing runs) and compares the buckets Flask-Limiter counted each request
in (``limiter.current_limits``, read when the request is torn down, before
Flask-Limiter forgets them).

The limits the limiter applies before the gate (its defaults, application
and blueprint limits) count those refused calls. A ``@limiter.limit`` in
front of the view (:class:`LimitLayer`) counts only a call the gate
admitted, once its decorator runs: the exercise's admitted call (the
``stack`` request as ``--subject``) is counted for real, and for the refused
call of the second subject the exercise reads the bucket the same limit
would count it in, with the limit's own key function and Flask-Limiter's
key, without counting it (:func:`would_count`). The run adds no hit to any
bucket: the admitted calls are the ones it sends anyway, and a second
admitted call would be counted against a real user's quota.

The key function is the app's: for the refused call it runs where the
limiter's own limits already ran theirs (``rate_limit_key`` asks the run's
throwaway store whether the call is a replay, once per request). A key of
the admitted user's (``current_user.id``, with the remote address when there
is none) differs between the two calls, so a limit counted per subject is
never reported; a key function that fails without a user leaves nothing to
compare.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from flask import Flask, request

from bailing_flask._pipeline.gate import EXERCISE_KEY, ExerciseProbe
from bailing_flask._pipeline.samples import sample_arguments
from bailing_flask.exercise._stack import closure, code_name, view_name, wrappers
from bailing_flask.integrations import rate_limit_key
from bailing_flask.lint import CompiledTool, compile_tools
from bailing_flask.testing import PROBE_SUBJECT, HubResponse

__all__ = ["Bucket", "LimitLayer", "SECOND_SUBJECT", "breached", "limit_fix", "limit_layers", "limiter_check",
           "recording", "shared", "would_count"]

#: The second subject of the comparison: unknown to every app, so the gate refuses it.
SECOND_SUBJECT = "__bailing_exercise__:second"

_FIX = ("Limiter(key_func=bailing_flask.rate_limit_key): one bucket per acting subject for tool calls, "
        "the remote address for everything else")


@dataclass(frozen=True)
class Bucket:
    """One limit Flask-Limiter counted a request against."""

    #: the limit, as Flask-Limiter prints it (``1000 per 1 minute``)
    limit: str
    #: the storage key: the same key is the same bucket
    key: str
    #: what the limit's key function returned
    value: str
    #: the limiter's own ``key_func``, when that is what returned ``value``;
    #: for a limit of a decorator, the key function it uses
    key_func: str | None
    #: the ``@limiter.limit`` in front of the view that made the limit (``None``: the limiter's own)
    layer: LimitLayer | None = None
    #: the limit refused the request (Flask-Limiter raised ``RateLimitExceeded``)
    breached: bool = False
    #: ``value`` is the request's remote address (the hub's, for every hub user)
    on_address: bool = False


@dataclass(frozen=True, eq=False)  # the Limiter is a weak proxy: one layer is itself alone
class LimitLayer:
    """One ``@limiter.limit`` (or ``@limiter.shared_limit``) in front of a tool's view."""

    #: the Limiter it belongs to
    limiter: Any
    #: Flask-Limiter's ``Limit``: what the decorator was given
    definition: Any
    #: the view it limits
    view: str

    @property
    def own_key_func(self) -> Any:
        """The decorator's own ``key_func``; ``None`` when it uses the limiter's (which
        ``@limiter.limit`` without ``key_func=`` keeps as its own)."""
        own = getattr(self.definition, "key_function", None)
        return None if own is None or own is getattr(self.limiter, "_key_func", None) else own

    @property
    def key_func(self) -> Any:
        return self.own_key_func or getattr(self.limiter, "_key_func", None)

    def describe(self) -> str:
        """``@limiter.limit('2/minute', key_func=flask_limiter.util.get_remote_address) on app.export``."""
        provider = getattr(self.definition, "limit_provider", "?")
        shown = repr(provider) if isinstance(provider, str) else code_name(provider)
        own = self.own_key_func
        key = f", key_func={code_name(own)}" if own is not None else ""
        kind = "shared_limit" if getattr(self.definition, "shared", False) else "limit"
        return f"@limiter.{kind}({shown}{key}) on {self.view}"


def limit_fix(layer: LimitLayer | None) -> str:
    """How to count a limit per acting subject."""
    if layer is None or layer.own_key_func is None:
        return _FIX
    drop = (", or drop its key_func (the limiter's own is bailing_flask.rate_limit_key)"
            if getattr(layer.limiter, "_key_func", None) is rate_limit_key else "")
    return (f"key_func=bailing_flask.rate_limit_key on that @limiter.limit{drop}: one bucket per acting "
            "subject for tool calls, the remote address for everything else")


def _limiters(app: Flask) -> list[Any]:
    found = app.extensions.get("limiter") or ()
    return list(found) if isinstance(found, (set, list, tuple, frozenset)) else [found]


def limit_layers(app: Flask, endpoint: str, method: str) -> list[LimitLayer]:
    """The Flask-Limiter decorators in front of a tool's view, outermost first."""
    layers = []
    for func in wrappers(app, endpoint, method):
        if not code_name(func).startswith("flask_limiter."):
            continue
        definition = closure(func).get("self")
        limiter = getattr(definition, "limiter", None)
        if limiter is not None and hasattr(definition, "limit_provider"):
            layers.append(LimitLayer(limiter, definition, view_name(func)))
    return layers


def _runtime_limits(layer: LimitLayer) -> list[Any]:
    try:
        return list(layer.definition)  # Flask-Limiter's RuntimeLimit, one per limit of the string
    except Exception:  # another Flask-Limiter version, or a limit string the app computes
        return []


def _scope(limit: Any, endpoint: str) -> str:
    return str(limit.scope_for(endpoint, request.method))


def _source(limit: Any, args: list[Any], layers: list[LimitLayer], endpoint: str) -> LimitLayer | None:
    """The decorator a limit Flask-Limiter counted comes from: same limit, same scope."""
    for layer in layers:
        for runtime in _runtime_limits(layer):
            try:
                if str(runtime.limit) == str(limit) and _scope(runtime, endpoint) == str(args[-1]):
                    return layer
            except Exception:
                continue
    return None


def _buckets(app: Flask, layers: list[LimitLayer]) -> list[Bucket]:
    """The buckets of the current request, in every limiter of ``app``."""
    found = []
    for limiter in _limiters(app):
        try:
            limits = list(getattr(limiter, "current_limits", None) or ())
            endpoint = str(limiter.identify_request())
        except Exception:  # another Flask-Limiter version: nothing to compare
            continue
        default = getattr(limiter, "_key_func", None)
        try:
            default_value = default() if callable(default) else None
        except Exception:
            default_value = None
        for limit in limits:
            args = list(getattr(limit, "request_args", None) or ())
            value = str(args[-2]) if len(args) >= 2 else ""
            source = _source(getattr(limit, "limit", None), args, layers, endpoint) if args else None
            if source is not None:
                key_func: str | None = code_name(source.key_func)
            elif default_value is not None and str(default_value) == value:
                key_func = code_name(default)
            else:
                key_func = None
            found.append(Bucket(str(getattr(limit, "limit", "?")), str(getattr(limit, "key", "")), value,
                                key_func, source, bool(getattr(limit, "breached", False)),
                                value == (request.remote_addr or "")))
    return found


def would_count(layer: LimitLayer) -> list[Bucket]:
    """The buckets the limits of ``layer`` would count the current request in, read, not counted.

    As Flask-Limiter does when the decorator runs: the limit's key function
    and scope, the limiter's key prefix, a limit exempt for this request
    left out; nothing is asked of the limiter's storage.
    """
    found = []
    try:
        endpoint = str(layer.limiter.identify_request())
        prefix = getattr(layer.limiter, "_key_prefix", "") or ""
        for limit in _runtime_limits(layer):
            if limit.is_exempt or limit.method_exempt:
                continue
            value = limit.key_func()
            args = [value, _scope(limit, endpoint)]
            if not all(args):
                continue
            key = limit.limit.key_for(*([prefix, *args] if prefix else args))
            found.append(Bucket(str(limit.limit), str(key), str(value), code_name(layer.key_func), layer,
                                on_address=str(value) == (request.remote_addr or "")))
    except Exception:  # a key function that needs an admitted call, another Flask-Limiter version
        return found
    return found


@contextlib.contextmanager
def recording(app: Flask, into: dict[int, list[Bucket]], unrun: dict[int, list[Bucket]]) -> Iterator[None]:
    """While open, ``into[id(probe)]`` gets the buckets of every exercise request, and
    ``unrun[id(probe)]``, for a request the gate refused, the buckets the view's own
    limits would have counted it in (:func:`would_count`)."""
    if not _limiters(app):
        yield
        return

    def torn_down(exc: BaseException | None) -> None:
        # a teardown function: it runs for a request the exercise stopped where the view would
        # start (ExerciseStop), and, added last, before Flask-Limiter's own forgets the request
        probe = request.environ.get(EXERCISE_KEY)
        if probe is None:
            return
        rule = request.url_rule
        try:
            layers = limit_layers(app, rule.endpoint, request.method) if rule is not None else []
        except Exception:
            layers = []
        into[id(probe)] = _buckets(app, layers)
        if getattr(probe, "gate", None) == "refused" and layers:
            unrun[id(probe)] = [bucket for layer in layers for bucket in would_count(layer)]

    teardown = app.teardown_request_funcs.setdefault(None, [])
    teardown.append(torn_down)
    try:
        yield
    finally:
        teardown.remove(torn_down)


def shared(first: list[Bucket], second: list[Bucket]) -> list[Bucket]:
    """The buckets both requests were counted in."""
    keys = {bucket.key for bucket in second if bucket.key}
    return [bucket for bucket in first if bucket.key in keys]


# -- the check ------------------------------------------------------------------------------

class _Runner(Protocol):
    """What the check needs of the running exercise (without importing it: it is above)."""

    #: ``id(probe)`` -> the buckets the request was counted in (:func:`recording`)
    buckets: dict[int, list[Bucket]]
    #: ``id(probe)`` -> the buckets a refused request's view limits would count it in
    unrun: dict[int, list[Bucket]]
    #: ``(tool, subject)`` -> the first request sent for it
    sent: dict[tuple[str, str | None], ExerciseProbe]
    #: ``(tool, subject, probe)`` of every tool request, in the order sent
    history: list[tuple[str, str | None, ExerciseProbe]]

    def add(self, *args: Any, **kwargs: Any) -> None: ...

    def send(self, mode: str, tool: CompiledTool, args: dict[str, Any], subject: str | None
             ) -> tuple[ExerciseProbe, HubResponse]: ...


def limiter_check(ex: _Runner, document: dict[str, Any]) -> None:
    """Two subjects' calls to each tool, from one address: does Flask-Limiter count them apart?"""
    reported: set[tuple[str, str | None]] = set()
    compared = 0
    for tool in compile_tools(document):
        first = ex.sent.get((tool.name, PROBE_SUBJECT))
        before = ex.buckets.get(id(first)) if first is not None else None
        admitted = _counted_in_the_view(ex, tool)
        if not before and admitted is None:
            continue  # no limit applied to the hub's call (or the limiter did not run)
        args = sample_arguments(document["paths"][tool.path][tool.method.lower()])
        probe, _ = ex.send("probe", tool, args, SECOND_SUBJECT)
        compared += 1
        for bucket in shared(before or [], ex.buckets.get(id(probe), [])):
            _shared_before_the_gate(ex, tool, bucket, reported)
        if admitted is not None:
            subject, counted = admitted
            for bucket in shared(counted, ex.unrun.get(id(probe), [])):
                _shared_in_the_view(ex, tool, subject, bucket, reported)
    if compared and not reported:
        ex.add("limiter", "config", "pass",
               f"two hub users from one address get a bucket each ({compared} tool(s) compared)")


def _counted_in_the_view(ex: _Runner, tool: CompiledTool) -> tuple[str, list[Bucket]] | None:
    """The first admitted call to ``tool`` that a ``@limiter.limit`` in front of its view counted:
    its subject, and the buckets of those limits."""
    for name, subject, probe in ex.history:
        if name == tool.name and subject is not None and probe.gate == "admitted":
            counted = [bucket for bucket in ex.buckets.get(id(probe), []) if bucket.layer is not None]
            if counted:
                return subject, counted
    return None


def _shared_before_the_gate(ex: _Runner, tool: CompiledTool, bucket: Bucket,
                            reported: set[tuple[str, str | None]]) -> None:
    if (bucket.limit, bucket.key_func) in reported:
        return
    reported.add((bucket.limit, bucket.key_func))
    how = f"key_func={bucket.key_func}" if bucket.key_func else "the limit's key function"
    ex.add("limiter", "config", "fail",
           f"two hub users calling {tool.name} from one address were counted in one "
           f"bucket of the limit {bucket.limit!r} (both keyed {bucket.value!r}): every hub "
           "call comes from the hub's address, so all of the hub's users share it",
           f"Flask-Limiter ({how})", limit_fix(None))


def _shared_in_the_view(ex: _Runner, tool: CompiledTool, subject: str, bucket: Bucket,
                        reported: set[tuple[str, str | None]]) -> None:
    layer = bucket.layer
    if layer is None or (bucket.limit, layer.describe()) in reported:
        return
    reported.add((bucket.limit, layer.describe()))
    how = layer.describe() + ("" if layer.own_key_func is not None
                              else f", with the limiter's key_func={bucket.key_func}")
    ex.add("limiter", "config", "fail",
           f"the limit {bucket.limit!r} of {layer.describe()} counted the admitted call to "
           f"{tool.name} as {subject!r} in the bucket of another hub user's call from the same "
           f"address (both keyed {bucket.value!r}): every hub call comes from the hub's address, "
           "so all of the hub's users share it",
           f"Flask-Limiter ({how})", limit_fix(layer))


def breached(buckets: list[Bucket], status: int) -> tuple[str, str] | None:
    """The limit that refused a call (``RateLimitExceeded``), as a culprit and its fix; ``None``
    when no limit refused it."""
    bucket = next((bucket for bucket in buckets if bucket.breached), None)
    if bucket is None:
        return None
    where = bucket.layer.describe() if bucket.layer is not None else "the limiter"
    culprit = (f"Flask-Limiter: the limit {bucket.limit!r} of {where} answered {status} "
               f"(RateLimitExceeded): its bucket, keyed {bucket.value!r}, is used up")
    fix = limit_fix(bucket.layer)
    if bucket.on_address:
        return culprit, f"it is keyed on the remote address, the hub's for every hub user: {fix}"
    return culprit, (f"its key {bucket.value!r} is not the hub's address: if it is this subject's own "
                     "bucket, its quota is used up (the exercise's calls count against it as the hub's do): "
                     f"run the exercise again once the window has passed; if every hub user shares it, {fix}")
