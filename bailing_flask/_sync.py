"""Call an app's callback whether it is ``def`` or ``async def``.

Flask runs ``async def`` views, hooks and error handlers through
``app.ensure_sync`` (which needs ``flask[async]``, i.e. asgiref). The
package's own callbacks (subject loader, authorizers, callback handlers,
the error handler, domain idempotency keys) go through the same door, so an
``async def`` authorizer is awaited instead of returning a coroutine object,
which is "not ``True``" and would deny every call without a word (or, for a
subject loader, hand the authorizer a truthy coroutine instead of a user).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from types import GeneratorType
from typing import Any

from flask import current_app, has_app_context

from bailing_flask.errors import ConfigurationError

__all__ = ["asgiref_available", "call_sync", "check_async_support", "is_async_callable"]


def is_async_callable(func: Any) -> bool:
    """``async def`` functions, and callables whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)
    return call is not None and not inspect.isfunction(func) and inspect.iscoroutinefunction(call)


def asgiref_available() -> bool:
    try:
        import asgiref.sync  # noqa: F401
    except ImportError:
        return False
    return True


def check_async_support(func: Any, what: str) -> None:
    """Refuse, when it is registered, an ``async def`` callback that could never run."""
    if is_async_callable(func) and not asgiref_available():
        raise ConfigurationError(
            f"{what} {getattr(func, '__qualname__', func)!r} is async, which needs Flask's async "
            "support: install flask[async] (asgiref)"
        )


def _settle(result: Any) -> Any:
    """Await what a plain function returned, if it is awaitable."""
    if not inspect.isawaitable(result):
        return result
    awaitable: Awaitable[Any] = result

    async def wait() -> Any:
        return await awaitable

    if has_app_context():
        return current_app.async_to_sync(wait)()
    import asyncio  # only outside an app: importing it costs every app's start-up

    return asyncio.run(wait())


#: Whether each callback seen so far is ``async``: decided once per function,
#: not on every call (subject loaders and authorizers run on every tool call).
_IS_ASYNC: dict[Any, bool] = {}
#: Results that are never awaitable: checked before ``inspect.isawaitable``.
_PLAIN_RESULTS = (bool, type(None), str, int, dict, tuple, list)


def call_sync(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``func(*args, **kwargs)``, awaited when ``func`` is async (or returns an awaitable)."""
    try:
        is_async = _IS_ASYNC[func]
    except (KeyError, TypeError):  # a new function, or an unhashable callable
        is_async = is_async_callable(func)
        if len(_IS_ASYNC) < 4096:
            try:
                _IS_ASYNC[func] = is_async
            except TypeError:
                pass
    if is_async and has_app_context():
        result = current_app.ensure_sync(func)(*args, **kwargs)
    else:
        result = func(*args, **kwargs)
    if result.__class__ in _PLAIN_RESULTS or not (
            hasattr(result, "__await__") or isinstance(result, GeneratorType)):
        return result  # a user object, a verdict: nothing to await (no inspect call per call)
    return _settle(result)
