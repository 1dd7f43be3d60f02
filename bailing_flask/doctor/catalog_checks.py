"""The checks of the catalog fetch: access policy, caching, the body, and the lint of what is served."""

from __future__ import annotations

import concurrent.futures
import uuid
from typing import Any
from urllib.parse import urljoin

from bailing_flask.wire.jsenc import js_trim as _js_trim
from bailing_flask.lint import compile_tools, lint_document
from bailing_flask.wire.signing import sign_tool_call
from bailing_flask.doctor.classify import (
    _PROTECTED_NEGATIVE,
    _cache_hits,
    _cache_layers,
    _json,
    _negative_access,
    _primary_access,
)
from bailing_flask.doctor.constants import SPEC_MAX_BYTES, WELL_KNOWN_CATALOG, ZERO_SIGNATURE, _T8
from bailing_flask.doctor.diagnose import _Diagnosis, _unique
from bailing_flask.doctor.report import CatalogAccess, Check, CheckStatus
from bailing_flask.doctor.transport import _Exchange, _parse_url, _short


class _CatalogChecks(_Diagnosis):
    """Checks 0 to 4: the base URL, and the catalog as the hub fetches it."""

    # -- 0. the base URL the app expects -------------------------------------------------------

    def base_url_check(self) -> None:
        """Compare the hub's base URL with the one the app derives its paths from."""
        expected = self.expected_base_url
        if expected is None:
            return
        want = _parse_url(expected)
        want_path = want.target.split("?", 1)[0].rstrip("/")
        source = self.expected_source
        if want_path == self.base_prefix:
            note = None
            if want.origin != self.base.origin:
                note = (f"The path matches; this run checks {self.base.origin}, the hub must use "
                        f"{expected}.")
            self.add(Check("base_url", "pass",
                           f"the app's tool paths are relative to this base URL ({source})",
                           detail=note))
            return
        self.add(Check(
            "base_url", "fail",
            f"base_url has the path {self.base_prefix or '/'!r}, but the app's tool paths are "
            f"relative to {want_path or '/'!r} ({source}): the hub would accept the tool source "
            "and then send every tool call to a URL that misses the route",
            detail=(f"The hub calls base_url + catalog path and signs only the catalog path, so "
                    f"the base URL registered in the hub must be {expected}."),
            fix=f"Register base_url {expected} in the hub's tool source, or change {source}.",
        ))

    # -- 1. catalog access ---------------------------------------------------------------------

    def catalog_access(self) -> _Exchange | None:
        """Fetch the catalog as the hub does and classify who can read it, like the hub.

        Returns the response whose body the later checks read (``None``: none).
        """
        ts = self.now()
        primary = self._fetch_catalog(ts)
        access = _primary_access(self.policy, primary)
        if access is not None:
            self.state.access = access
            return self._primary_decides(primary, access)
        unsigned, invalid = self._negative_probes(ts)
        self.state.access = access = _negative_access(primary, unsigned, invalid)
        evidence = (f"signed {primary.status}, unsigned {_short(unsigned)}, "
                    f"bad signature {_short(invalid)}")
        if access.status == "public":
            self._readable_without_signature(primary, unsigned, invalid, evidence)
        elif access.status == "protected":
            self.add(Check("catalog.access", "pass", f"protected: {evidence}"))
        else:
            self._negatives_inconclusive(unsigned, invalid, evidence)
        return primary

    def _fetch_catalog(self, ts: str) -> _Exchange:
        """The hub's own fetch: signed, unless the policy is ``public_allowed``."""
        url = self.catalog.href
        signed_path = self.catalog.target
        if self.policy == "public_allowed":
            return self.http.send("catalog_primary_unsigned", "GET", url, {}, limit=SPEC_MAX_BYTES)
        headers = {
            "x-bailing-timestamp": ts,
            "x-bailing-signature": sign_tool_call(self.secret, ts, "GET", signed_path),
        }
        return self.http.send("catalog_signed", "GET", url, headers, limit=SPEC_MAX_BYTES)

    def _negative_probes(self, ts: str) -> tuple[_Exchange, _Exchange]:
        """The two concurrent negative probes: unsigned, and a bad signature."""
        url = self.catalog.href
        invalid_headers = {"x-bailing-timestamp": ts, "x-bailing-signature": ZERO_SIGNATURE}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            unsigned_future = pool.submit(self.http.send, "catalog_unsigned", "GET", url, {},
                                          limit=SPEC_MAX_BYTES)
            invalid_future = pool.submit(self.http.send, "catalog_bad_signature", "GET", url,
                                         invalid_headers, limit=SPEC_MAX_BYTES)
            unsigned, invalid = unsigned_future.result(), invalid_future.result()
        self.negatives = (unsigned, invalid)
        return unsigned, invalid

    def _primary_decides(self, primary: _Exchange, access: CatalogAccess) -> _Exchange | None:
        """Report a verdict the hub reached on its own fetch alone."""
        url = self.catalog.href
        if primary.status is None:
            self.add(Check(
                "catalog.access", "fail",
                f"inconclusive: the catalog fetch failed ({primary.error}); the hub keeps its old catalog",
                detail=f"GET {url}",
                fix=_unreachable_fix(primary.error, self.timeout),
            ))
            return None
        if not primary.ok:
            return self._primary_refused(primary, access.primary_reason)
        if primary.too_big:
            self.add(Check(
                "catalog.access", "fail",
                f"inconclusive: HTTP {primary.status} but the body exceeds {SPEC_MAX_BYTES} bytes (5 MiB); "
                "the hub aborts the read and keeps its old catalog",
                fix="Serve a smaller catalog (expose fewer operations, shorten schemas and descriptions).",
            ))
            return None
        self.add(Check("catalog.access", "pass",
                       f"public (policy public_allowed): unsigned {primary.status}",
                       detail="Anyone can read this catalog; tool calls are still signed."))
        return primary

    def _readable_without_signature(
        self, primary: _Exchange, unsigned: _Exchange, invalid: _Exchange, evidence: str
    ) -> None:
        """``public`` under ``signed_required``: say whether a cache or the origin leaks it."""
        cache = self._cache_evidence(primary, unsigned, invalid)
        if cache:
            why = ("A cache between the hub and the app stored the signed catalog and serves it to "
                   "anyone: " + cache)
            fix = ("Make the cache honour Cache-Control: private, no-store (or bypass it for "
                   f"{self.catalog.target.split('?')[0]}), purge the stored copy, and point "
                   "spec_url at a host that reaches the origin directly (trap T5).")
        else:
            why = ("The origin itself serves the catalog without a valid signature (e.g. "
                   "BAILING_PUBLIC_CATALOG is on, or the route is not behind the verification).")
            fix = ("Serve the catalog only to signed requests (turn BAILING_PUBLIC_CATALOG off), or "
                   "switch the tool source to the public_allowed policy if that is intended.")
        self.add(Check(
            "catalog.access", "fail",
            f"public: {evidence}; under signed_required the hub refuses the refresh",
            detail=why, fix=fix,
        ))

    def _negatives_inconclusive(self, unsigned: _Exchange, invalid: _Exchange, evidence: str) -> None:
        """``inconclusive``: name what answered the negative probes instead of the app."""
        odd = [(name, ex) for name, ex in (("unsigned", unsigned), ("bad-signature", invalid))
               if ex.status not in _PROTECTED_NEGATIVE]
        causes = []
        for name, ex in odd:
            if ex.redirect:
                where = ex.header("location") or "?"
                causes.append(f"the {name} probe was redirected ({ex.status} to {where}): a login "
                              "redirect or an auth layer in front of the app")
            elif ex.status is None:
                causes.append(f"the {name} probe failed: {ex.error}")
            elif ex.status == 429:
                causes.append(f"the {name} probe was rate-limited (429, a WAF or rate limiter)")
            elif ex.status >= 500:
                causes.append(f"the {name} probe got a server error ({ex.status})")
            else:
                causes.append(f"the {name} probe got {ex.status}")
        self.add(Check(
            "catalog.access", "fail",
            f"inconclusive: {evidence}; the hub refuses the refresh and keeps its old catalog",
            detail=("Trap T21: the negative probes must be answered 401, 403 or 404. Here " +
                    "; ".join(causes) + "."),
            fix=(f"Exempt {self.catalog.target.split('?')[0]} from login redirects, WAF rules and rate "
                 "limits, and let the app answer unsigned or badly signed requests itself (401)."),
        ))

    def _cache_evidence(self, primary: _Exchange, unsigned: _Exchange, invalid: _Exchange) -> str:
        """Explain why a negative probe could read the catalog, if a cache did it."""
        clues = []
        for name, ex in (("signed", primary), ("unsigned", unsigned), ("bad-signature", invalid)):
            hits = _cache_hits(ex)
            if hits:
                clues.append(f"the {name} response carries {', '.join(hits)}")
        same = [name for name, ex in (("unsigned", unsigned), ("bad-signature", invalid))
                if ex.ok and ex.body == primary.body and primary.body]
        if same:
            clues.append(f"the {' and '.join(same)} probe got byte-for-byte the signed catalog")
        # bypass any cache with a query nobody asked before: the origin's own answer
        sep = "&" if "?" in self.catalog.href else "?"
        busted = self.http.send("diagnostic_cache_bypass", "GET",
                                f"{self.catalog.href}{sep}bailing_doctor={uuid.uuid4().hex[:12]}", {})
        if busted.status in _PROTECTED_NEGATIVE and (unsigned.ok or invalid.ok):
            clues.append(f"an unsigned request with a fresh query string (which no cache holds) gets "
                         f"{busted.status} from the origin")
            return "; ".join(clues) + "."
        if any(_cache_hits(ex) for ex in (unsigned, invalid)):
            return "; ".join(clues) + "."
        return ""

    def _primary_refused(self, primary: _Exchange, reason: str | None) -> _Exchange | None:
        status = primary.status
        assert status is not None
        summary = f"inconclusive: signed {status}" if self.policy == "signed_required" else (
            f"inconclusive: unsigned {status}")
        if primary.redirect:
            location = primary.header("location") or "(no Location)"
            self.add(Check(
                "catalog.access", "fail",
                f"{summary} redirect to {location}; the hub never follows redirects on the catalog "
                "and keeps its old catalog",
                detail=_T8,
                fix=(f"Serve the catalog at spec_url itself (use the final URL {urljoin(primary.url, location)} "
                     "as spec_url if that is where it lives; no http->https, trailing-slash or login "
                     "redirects)."),
            ))
            return None
        if status == 401 and self.policy == "signed_required":
            return self._diagnose_catalog_401(primary, reason)
        if status == 404:
            self.add(Check(
                "catalog.access", "fail",
                f"{summary}: nothing is served at {self.catalog.target}",
                detail="The hub keeps its old catalog.",
                fix=("Check spec_url: by default bailing_flask serves the catalog at "
                     f"<app root>{WELL_KNOWN_CATALOG} (BAILING_PATH_PREFIX + /tools.json); behind a "
                     "prefix the public URL includes it."),
            ))
            return None
        detail = f"Reason given: {reason}." if reason else None
        if status == 403:
            fix = "Let the signed request through every layer in front of the app (WAF, IP allow-lists)."
        elif status == 429:
            fix = f"Exempt {self.catalog.target.split('?')[0]} from rate limits."
        elif status >= 500:
            fix = "See the server log: the catalog could not be served."
        else:
            fix = "The catalog must answer 2xx to a correctly signed GET."
        self.add(Check("catalog.access", "fail", f"{summary}; the hub keeps its old catalog",
                       detail=detail, fix=fix))
        return None

    # -- 2. caching / headers ------------------------------------------------------------------

    def catalog_caching(self, primary: _Exchange | None) -> None:
        if primary is None:
            self.skip("catalog.caching", "no catalog response to inspect")
            return
        cache_control = primary.header("cache-control") or ""
        tokens = {t.strip().split("=")[0].lower() for t in cache_control.split(",") if t.strip()}
        hits = _cache_hits(primary)
        layers = _cache_layers(primary)
        leaked = [ex for ex in self.negatives if ex.ok]
        access = self.state.access
        cached = bool(hits) or bool(leaked and access and access.status == "public"
                                    and any(_cache_hits(ex) for ex in leaked))
        if self.policy == "public_allowed":
            self.add(Check("catalog.caching", "pass",
                           f"public catalog; Cache-Control: {cache_control or '(none)'}"))
            return
        missing = [t for t in ("private", "no-store") if t not in tokens]
        detail_lines = []
        if layers:
            detail_lines.append("Caching layer in the path: " + "; ".join(layers) + ".")
        if cached:
            evidence = _unique(hits or [h for ex in leaked for h in _cache_hits(ex)])
            self.add(Check(
                "catalog.caching", "fail",
                "a cache serves the signed catalog (" + ", ".join(evidence) + ")",
                detail=("A CDN or proxy that caches the signed fetch turns it into a public copy: anyone "
                        "who requests spec_url gets the catalog without a signature. " +
                        " ".join(detail_lines)).strip(),
                fix=("Send Cache-Control: private, no-store (bailing_flask does) and make the "
                     "cache honour it, or bypass the cache for the catalog path; purge the stored copy."),
            ))
            return
        if missing:
            self.add(Check(
                "catalog.caching", "warn",
                f"the signed catalog lacks Cache-Control {', '.join(missing)} "
                f"(got: {cache_control or 'no Cache-Control'})",
                detail=("The contract requires Cache-Control: private, no-store on the signed catalog; "
                        "the hub does not check it, but any shared cache may store the signed copy and "
                        "serve it to anyone. " + " ".join(detail_lines)).strip(),
                fix="Add Cache-Control: private, no-store to the catalog response (check that no proxy "
                    "strips or rewrites it).",
            ))
            return
        self.add(Check(
            "catalog.caching", "pass",
            f"Cache-Control: {cache_control}; no cache answered",
            detail=" ".join(detail_lines) or None,
        ))

    # -- 3. body -------------------------------------------------------------------------------

    def catalog_body(self, primary: _Exchange | None) -> None:
        if primary is None:
            self.skip("catalog.body", "no catalog body")
            return
        size = len(primary.body)
        content_type = primary.header("content-type") or ""
        media = content_type.split(";")[0].strip().lower()
        is_json_type = media == "application/json" or media.endswith("+json")
        text = primary.body.decode("utf-8", "replace")
        text = text.removeprefix("\ufeff")
        text = _js_trim(text)
        prefix = (self.state.document_from_variant + ". ") if self.state.document_from_variant else ""
        if not text:
            self.add(Check("catalog.body", "fail", f"the catalog body is empty (HTTP {primary.status})",
                           detail=prefix + "The hub refuses an empty spec.",
                           fix="Serve the OpenAPI document as JSON."))
            return
        try:
            document: Any = _json(text)
            format_ = "JSON"
        except ValueError as exc:
            document, format_ = None, None
            json_error = str(exc)
            try:
                import yaml

                loaded = yaml.safe_load(text)
            except ImportError:  # PyYAML is optional: without it YAML catalogs are not read
                loaded = None
            except yaml.YAMLError:
                loaded = None
            except (RecursionError, ValueError, TypeError):
                loaded = None
            if isinstance(loaded, dict):
                document, format_ = loaded, "YAML"
            if document is None:
                html = media == "text/html" or text[:15].lower().startswith(("<!doctype", "<html"))
                self.add(Check(
                    "catalog.body", "fail",
                    "the catalog is neither JSON nor YAML" + (" (an HTML page)" if html else "")
                    + "; the hub refuses the refresh",
                    detail=prefix + f"JSON error: {json_error}. First bytes: {text[:120]!r}",
                    fix=("Something in front of the app answers instead of it (an HTML page usually "
                         "means a login page, an error page or a default vhost)." if html
                         else "Serve the OpenAPI document as a JSON object."),
                ))
                return
        if not isinstance(document, dict):
            self.add(Check("catalog.body", "fail",
                           f"the catalog's root is a {type(document).__name__}, not an object; the hub "
                           "refuses it", detail=prefix or None,
                           fix="Serve the OpenAPI document (a JSON object) itself."))
            return
        self.state.document = document
        problems = []
        status: CheckStatus = "pass"
        if format_ == "YAML":
            problems.append("the body is YAML, not JSON (the hub accepts it, but JSON is the contract)")
            status = "warn"
        if not is_json_type:
            problems.append(f"Content-Type is {content_type or 'missing'}, not application/json "
                            "(the hub does not check it)")
            status = "warn"
        summary = f"{format_} object, {size} bytes (limit 5 MiB), Content-Type {content_type or '(none)'}"
        if problems:
            summary = "; ".join(problems)
        if self.state.document_from_variant:
            summary += " (read with a corrected signature, for diagnosis: the hub cannot read it)"
        self.add(Check(
            "catalog.body", status, summary,
            detail=(prefix.strip() or None),
            fix="Send Content-Type: application/json; charset=utf-8 and a JSON body." if problems else None,
        ))

    # -- 4. lint -------------------------------------------------------------------------------

    def catalog_lint(self) -> None:
        document = self.state.document
        if document is None:
            self.skip("catalog.lint", "no catalog to lint")
            return
        findings = lint_document(document)
        errors = [f for f in findings if f.severity == "error"]
        warnings = [f for f in findings if f.severity == "warning"]
        tools = compile_tools(document)
        lines = [f"{f.severity}: {f.code} {f.path}: {f.message}" for f in (errors + warnings)[:12]]
        if len(errors) + len(warnings) > 12:
            lines.append(f"... and {len(errors) + len(warnings) - 12} more")
        summary = f"{len(tools)} tool(s), {len(errors)} error(s), {len(warnings)} warning(s)"
        if errors:
            self.add(Check("catalog.lint", "fail", summary, detail="\n".join(lines),
                           fix="Fix the errors (run `flask bailing check` on the app); the hub drops "
                               "those operations or, for some, every tool of the source."))
        elif warnings:
            self.add(Check("catalog.lint", "warn", summary, detail="\n".join(lines),
                           fix="See `flask bailing check` for each warning's suggestion."))
        else:
            self.add(Check("catalog.lint", "pass", summary))


def _unreachable_fix(error: str | None, timeout: float) -> str:
    if error is not None and "CERTIFICATE_VERIFY_FAILED" in error:
        return ("The server's certificate does not verify. A certificate of your own CA (or a "
                "self-signed one): pass --cacert with that CA's PEM file, and make the hub's Node "
                "trust it too (NODE_EXTRA_CA_CERTS); otherwise serve a certificate of a public CA "
                "for this host name.")
    return ("Make spec_url reachable from the hub (DNS, firewall, TLS certificate, "
            f"answer within {timeout:g} s).")
