"""The doctor reads a probe answer's body as the hub does: ``Response.text()`` drops a UTF-8 BOM.

The hub decodes the dedicated probe's answer with ``fetch``'s ``text()``
(WHATWG "UTF-8 decode", which removes one leading byte order mark) before
``JSON.parse``, so ``EF BB BF {"authorized":false}`` is a pass there. A
doctor that keeps the BOM fails to parse the body and reports the probe
``inconclusive``: a verdict the hub does not reach.
"""

from __future__ import annotations

from bailing_flask.doctor.classify import _classify_probe
from bailing_flask.doctor.transport import _Exchange
from bailing_flask.lint import ProbeTarget

DEDICATED = ProbeTarget("dedicated", "POST", "/bailing/authz-probe", "probe")


def answer(body: bytes) -> _Exchange:
    return _Exchange("test", "POST", "http://h/bailing/authz-probe", 200,
                     (("content-type", "application/json"),), body)


def test_a_bom_before_the_probe_answer_is_read_like_the_hub():
    outcome = _classify_probe(DEDICATED, answer(b'\xef\xbb\xbf{"authorized":false}'), True)
    assert outcome.status == "pass"
    outcome = _classify_probe(DEDICATED, answer(b'\xef\xbb\xbf{"authorized":true}'), True)
    assert outcome.status == "suspect"
