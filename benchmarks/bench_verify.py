"""verify: cost of ``Verifier.verify`` on a signed 1 KiB body.

Compared with

* a **floor** written inline: the irreducible work of any verifier of this
  scheme - one ``sha256(body).hexdigest()``, one
  ``hmac.new(key, msg, sha256).hexdigest()`` over a canonical string of the
  very same length, one ``hmac.compare_digest``; target <= 1.5x;
* ``slack_sdk.signature.SignatureVerifier.is_valid`` on the same body (a
  peer that checks a timestamp and an HMAC over ``v0:ts:body``); target:
  faster, ratio < 1.0.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from bailing_flask.wire.signing import Verifier, canonical_tool_call, sign_tool_call

from ._harness import Result, compare, ratio_result

GROUP = "verify"
SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
BODY_SIZE = 1024
PATH = "/tools/orders/search?limit=10"
SUBJECT = "179:1"
JOB_ID = "8d7c2f3e-5b1a-4c9d-9e8f-0a1b2c3d4e5f"


def make_body(size: int = BODY_SIZE) -> bytes:
    """A deterministic JSON document of exactly ``size`` ASCII bytes."""
    head, tail = b'{"query":"', b'"}'
    filler = (b"abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1))[: size - len(head) - len(tail)]
    body = head + filler + tail
    assert len(body) == size
    return body


def build_cases() -> tuple[dict, dict]:
    body = make_body()
    stamp = str(int(time.time()))
    key = SECRET.encode("utf-8")

    # --- bailing_flask ---------------------------------------------------
    verifier = Verifier(SECRET)
    signature = sign_tool_call(SECRET, stamp, "POST", PATH, body, SUBJECT, JOB_ID)
    verify = verifier.verify
    kwargs = dict(
        signature=signature,
        timestamp=stamp,
        method="POST",
        path_with_query=PATH,
        body=body,
        on_behalf_of=SUBJECT,
        job_id=JOB_ID,
    )

    def bailing() -> None:
        verify(**kwargs)

    # --- floor: the same primitives, nothing else ---------------------------
    canonical = canonical_tool_call(
        stamp, "POST", PATH, hashlib.sha256(body).hexdigest(), SUBJECT, JOB_ID
    )
    # A canonical string of the same length, prebuilt (the floor builds nothing).
    floor_msg = bytes(len(canonical))
    floor_expected = hmac.new(key, floor_msg, hashlib.sha256).hexdigest()
    sha256, hmac_new, compare_digest = hashlib.sha256, hmac.new, hmac.compare_digest

    def floor() -> None:
        sha256(body).hexdigest()
        if not compare_digest(hmac_new(key, floor_msg, sha256).hexdigest(), floor_expected):
            raise AssertionError("floor mismatch")

    # --- slack_sdk --------------------------------------------------------
    from slack_sdk.signature import SignatureVerifier

    slack = SignatureVerifier(SECRET)
    slack_signature = slack.generate_signature(timestamp=stamp, body=body)
    is_valid = slack.is_valid

    def slack_sdk() -> None:
        if not is_valid(body, stamp, slack_signature):
            raise AssertionError("slack mismatch")

    # sanity: every case accepts its input before anything is timed
    bailing()
    floor()
    slack_sdk()
    info = {
        "body_bytes": len(body),
        "canonical_bytes": len(canonical),
        "slack_sdk_version": _slack_version(),
    }
    return {"bailing": bailing, "floor": floor, "slack_sdk": slack_sdk}, info


def _slack_version() -> str:
    try:
        from slack_sdk.version import __version__

        return __version__
    except Exception:  # pragma: no cover
        return "?"


def run(quick: bool = False) -> list[Result]:
    cases, info = build_cases()
    per_round = compare(cases, rounds=15 if quick else 101, block_ms=4.0)
    return [
        ratio_result(
            per_round,
            group=GROUP,
            name="verify_vs_floor",
            numerator="bailing",
            denominator="floor",
            metric="Verifier.verify time / floor time (1 KiB body)",
            op="<=",
            threshold=1.5,
            extra=info,
        ),
        ratio_result(
            per_round,
            group=GROUP,
            name="verify_vs_slack_sdk",
            numerator="bailing",
            denominator="slack_sdk",
            metric="Verifier.verify time / slack_sdk is_valid time (1 KiB body)",
            op="<",
            threshold=1.0,
            extra=info,
        ),
    ]
