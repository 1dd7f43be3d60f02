"""Short inputs are hashed by Python's own SHA-256, long ones by OpenSSL's: the same digests either way.

The signed request's body and its signed string are short; hashing them
without OpenSSL's generic digest code is what a server's worker saves per
call. What must not change is any digest, HMAC or verdict: these tests
compare both implementations at the size boundary and on the hub's frozen
vectors, including a Python without its own SHA-256 (a FIPS build may leave
it out) and one whose OpenSSL runs in FIPS mode, each run in a subprocess.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import subprocess
import sys
import textwrap

import pytest

from bailing_flask.wire import Verifier, sign_callback, sign_tool_call, verify_callback
from bailing_flask.wire import digest
from bailing_flask.wire.body import read_body_parts
from bailing_flask.wire.signing import _Key

from .helpers import HUB_SECRET, STRONG_SECRET, VECTOR_TS, FrozenClock

SIZES = (0, 1, 55, 56, 64, digest.SMALL - 1, digest.SMALL, digest.SMALL + 1, 5000)


def test_this_python_has_its_own_sha256():
    """The machines the package is tested on are not FIPS builds nor in FIPS mode: the fast path is tested."""
    assert digest.builtin is not hashlib.sha256


@pytest.mark.parametrize("size", SIZES)
def test_short_and_long_inputs_hash_like_hashlib(size):
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert digest.sha256_hex(data) == hashlib.sha256(data).hexdigest()
    assert digest.sha256_hex(bytearray(data)) == hashlib.sha256(data).hexdigest()
    state = digest.builtin(data)  # what the HMAC keys hold: copied per message, then fed
    copy = state.copy()
    copy.update(b"more")
    assert copy.hexdigest() == hashlib.sha256(data + b"more").hexdigest()
    assert state.hexdigest() == hashlib.sha256(data).hexdigest()  # the copy left it as it was


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("secret", [b"k", STRONG_SECRET.encode(), b"x" * 64, b"y" * 65, b"z" * 200])
def test_the_precomputed_hmac_is_the_standard_hmac_on_both_sides_of_the_boundary(secret, size):
    message = b"m" * size
    assert _Key("0", secret).mac(message) == hmac.new(secret, message, hashlib.sha256).digest()


def test_the_body_reader_hashes_a_small_body_like_hashlib():
    body = b'{"sku":"A-1001","quantity":2}'
    environ = {"CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
    sha, length, stream, spilled = read_body_parts(environ, 1 << 20, 1 << 16)
    assert (sha, length, stream.read(), spilled) == (hashlib.sha256(body).hexdigest(), len(body), body, False)


def test_a_long_callback_body_still_verifies():
    """A callback body longer than the short-input limit takes OpenSSL's side of the HMAC."""
    body = '{"kind":"delivery","note":"' + "x" * (3 * digest.SMALL) + '"}'
    ts = 1718000000123
    signature = sign_callback(STRONG_SECRET, ts, body)
    assert signature == "sha256=" + hmac.new(
        STRONG_SECRET.encode(), f"{ts}.{body}".encode(), hashlib.sha256).hexdigest()
    assert verify_callback(STRONG_SECRET, str(ts), signature, body, clock=lambda: ts / 1000) == "0"


#: what a subprocess sets up before importing the package, to be a Python that must use OpenSSL alone
_OPENSSL_ONLY = {
    # importing either module now raises ImportError, as on a build that left Python's own out
    "without_builtin": 'sys.modules["_sha2"] = None\nsys.modules["_sha256"] = None\n',
    # OpenSSL in FIPS mode (no machine here runs one): its answer, as _hashlib would give it
    "fips_mode": "import _hashlib\n_hashlib.get_fips_mode = lambda: 1\n",
}

_SIGN_AND_VERIFY = textwrap.dedent("""
    import hashlib
    from bailing_flask.wire import Verifier, digest, sign_tool_call
    assert digest.builtin is hashlib.sha256, digest.builtin
    body = b'{"title":"test","price":9.9}'
    signature = sign_tool_call(SECRET, TS, "POST", "/goods/create", body, "179:1", "job-test-001")
    assert signature == "sha256=6deb8dbd54268eee4631129b442acbc9797431642473326a10a5b0826431aae5"
    label = Verifier(SECRET, clock=lambda: TS).verify(
        signature=signature, timestamp=str(TS), method="POST", path_with_query="/goods/create",
        body=body, on_behalf_of="179:1", job_id="job-test-001")
    print("verified with key", label)
""")


@pytest.mark.parametrize("why", sorted(_OPENSSL_ONLY))
def test_a_python_that_must_use_openssl_signs_and_verifies_with_it_alone(why):
    script = f"import sys\nSECRET, TS = {HUB_SECRET!r}, {VECTOR_TS}\n" + _OPENSSL_ONLY[why] + _SIGN_AND_VERIFY
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "verified with key 0"


def test_the_hub_vector_verifies_on_the_short_input_path():
    body = '{"title":"test","price":9.9}'
    signature = sign_tool_call(HUB_SECRET, VECTOR_TS, "POST", "/goods/create", body, "179:1", "job-test-001")
    assert signature == "sha256=6deb8dbd54268eee4631129b442acbc9797431642473326a10a5b0826431aae5"
    verifier = Verifier(HUB_SECRET, clock=FrozenClock(VECTOR_TS))
    assert verifier.verify(signature=signature, timestamp=str(VECTOR_TS), method="POST",
                           path_with_query="/goods/create", body=body.encode(),
                           on_behalf_of="179:1", job_id="job-test-001") == "0"
