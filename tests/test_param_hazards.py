"""Minimal parameters: identity, credentials and infrastructure never come from the model."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from pydantic import BaseModel, Field, HttpUrl, SecretStr

from bailing_flask import Bailing, Param, ToolDeclarationError, tool
from bailing_flask.lint import Finding
from bailing_flask._pipeline.param_hazards import CODES, classify
from bailing_flask.testing import HubSimulator

from .helpers import STRONG_SECRET
from bailing_flask._state import state_of
from bailing_flask._pipeline.catalog import catalog_of


@pytest.mark.parametrize(("name", "expected"), [
    ("tenant_id", ("identity_param", "tenant")),
    ("tenantId", ("identity_param", "tenant")),
    ("X-Tenant-Id", ("identity_param", "tenant")),
    ("org_id", ("identity_param", "tenant")),
    ("userId", ("identity_param", "user")),
    ("user_id", ("identity_param", "user")),
    ("owner", ("identity_param", "user")),
    ("on_behalf_of", ("identity_param", "user")),
    ("requested_by", ("identity_param", "user")),
    ("subject_id", ("identity_param", "user")),
    ("role", ("identity_param", "role")),
    ("is_admin", ("identity_param", "role")),
    ("departmentIds", ("identity_param", "department")),
    ("permissions", ("identity_param", "permission")),
    ("access_token", ("credential_param", "token")),
    ("api_key", ("credential_param", "token")),
    ("apiKey", ("credential_param", "token")),
    ("APIKey", ("credential_param", "token")),
    ("sessionId", ("credential_param", "token")),
    ("password", ("credential_param", "password")),
    ("client_secret", ("credential_param", "secret")),
    ("Authorization", ("credential_param", "secret")),
    ("base_url", ("infrastructure_param", "URL")),
    ("baseURL", ("infrastructure_param", "URL")),
    ("redirect_uri", ("infrastructure_param", "callback")),
    ("webhook", ("infrastructure_param", "callback")),
    ("callbackUrl", ("infrastructure_param", "callback")),
    ("host", ("infrastructure_param", "host")),
])
def test_names_that_are_hazards(name: str, expected: tuple[str, str]) -> None:
    assert classify(name) == expected


@pytest.mark.parametrize("name", [
    "order_id", "customer_id", "keyword", "status", "page", "page_token", "next_page_token",
    "max_tokens", "token_count", "subject", "message", "user_message", "amount", "reason", "phone",
    "key", "sort_key", "title",
])
def test_names_that_are_not(name: str) -> None:
    assert classify(name) is None


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "string", "format": "uri"}, ("infrastructure_param", "URL")),
    ({"type": "string", "format": "hostname"}, ("infrastructure_param", "host")),
    ({"type": "string", "format": "password", "writeOnly": True}, ("credential_param", "password")),
    ({"type": "array", "items": {"type": "string", "format": "uri"}}, ("infrastructure_param", "URL")),
    ({"type": "string", "format": "date"}, None),
])
def test_schemas_that_are_hazards(schema: dict[str, Any], expected: tuple[str, str] | None) -> None:
    assert classify("target", schema) == expected


class Hook(BaseModel):
    target: HttpUrl = Field(description="Where to send it.")


class ExportBody(BaseModel):
    report: str = Field(description="Which report.")
    department: str = Field(description="Whose data.")
    access_token: SecretStr = Field(description="The CRM token.")
    hooks: list[Hook] = Field(default_factory=list, description="Who to tell.")
    filters: dict[str, Any] = Field(default_factory=dict, description="Row filters.")


class Reassign(BaseModel):
    user_id: str = Field(description="The account to unlock.")


def make_app() -> Flask:
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.post("/tenants/<tenant_id>/export")
    @tool(scope="report.export", body=ExportBody,
          params=[Param("tenant_id", location="path", description="Tenant."),
                  Param("X-User-Id", location="header", description="User.")])
    def export(tenant_id: str) -> Any:
        """Export a report."""
        return {"ok": True}

    @app.post("/accounts/unlock")
    @tool(scope="account.admin", body=Reassign,
          model_chooses={"user_id": "the administrator names the account to unlock; the "
                                    "authorizer checks it belongs to their tenant"})
    def unlock() -> Any:
        """Unlock an account."""
        return {"ok": True}

    @app.get("/orders")
    @tool(scope="order.read",
          params=[Param("keyword", description="Search words."),
                  Param("owner", description="Whose orders.")],
          model_chooses={"ownr": "a typo: silences nothing at all"})
    def orders() -> Any:
        """Search orders."""
        return {"orders": []}

    return app


def findings_of(app: Flask, path: str) -> dict[str, Finding]:
    found = [f for f in catalog_of(state_of(app)).findings if f.path == path]
    return {f.code: f for f in found if f.code in CODES}


def test_one_warning_per_kind_names_every_parameter_and_where_it_must_come_from() -> None:
    findings = findings_of(make_app(), "POST /tenants/{tenant_id}/export")
    assert set(findings) == {"identity_param", "credential_param", "infrastructure_param"}
    identity = findings["identity_param"]
    assert identity.severity == "warning" and identity.source == "bailing"
    assert identity.message.startswith(
        "parameters 'tenant_id' (tenant), 'X-User-Id' (user), 'department' (department) of 'export'")
    assert "signed subject" in identity.message
    assert identity.suggestion is not None and "current_call.subject" in identity.suggestion
    assert "model_chooses={'tenant_id':" in identity.suggestion
    assert "'access_token' (token)" in findings["credential_param"].message
    assert "secret store" in (findings["credential_param"].suggestion or "")
    assert "'hooks[].target' (URL)" in findings["infrastructure_param"].message  # nested, by format
    assert "allow-list" in (findings["infrastructure_param"].suggestion or "")


def test_a_stated_reason_silences_it_and_a_wrong_name_is_reported() -> None:
    app = make_app()
    assert findings_of(app, "POST /accounts/unlock") == {}
    orders = findings_of(app, "GET /orders")
    assert set(orders) == {"identity_param", "model_chooses_unknown"}
    assert "'ownr'" in orders["model_chooses_unknown"].message


def test_warnings_do_not_take_the_tool_out_of_the_served_catalog() -> None:
    app = make_app()
    hub = HubSimulator(app, STRONG_SECRET)
    assert "/tenants/{tenant_id}/export" in hub.document()["paths"]
    assert catalog_of(state_of(app)).excluded == []


def test_flask_bailing_check_shows_them() -> None:
    result = make_app().test_cli_runner().invoke(args=["bailing", "check"])
    assert result.exit_code == 0, result.output
    assert "WARNING identity_param" in result.output and "POST /tenants/{tenant_id}/export" in result.output
    assert "WARNING credential_param" in result.output and "WARNING infrastructure_param" in result.output
    assert "WARNING model_chooses_unknown" in result.output


@pytest.mark.parametrize("value", [
    {"user_id"}, ["user_id"], {"user_id": ""}, {"user_id": "ok"}, {"user_id": 3}, "user_id",
])
def test_a_reason_is_mandatory(value: Any) -> None:
    with pytest.raises(ToolDeclarationError, match="model_chooses"):
        tool(scope="x.read", model_chooses=value)(lambda: None)


def search_app() -> Flask:
    """A support desk's ticket search filtered by department, and the identity parameters it must not take."""
    app = Flask(__name__)
    app.config.update(BAILING_SECRETS=[STRONG_SECRET], BAILING_STORE="memory://")
    Bailing(app).authorizer(lambda call: True)

    @app.get("/tickets")
    @tool(scope="ticket.read", params=[Param("department", description="Only this department's tickets."),
                                       Param("departmentIds", description="Or these departments'."),
                                       Param("status", description="open or closed.")])
    def tickets() -> Any:
        """Search tickets."""
        return {"tickets": []}

    @app.get("/reports")
    @tool(scope="report.read", params=[Param("tenant_id", description="Tenant."),
                                       Param("user_id", description="User."),
                                       Param("owner", description="Owner."),
                                       Param("account_id", description="Account."),
                                       Param("X-Department", location="header", description="Acting department.")])
    def reports() -> Any:
        """Read reports."""
        return {"reports": []}

    return app


def test_a_department_search_filter_of_a_read_tool_is_not_an_identity_parameter() -> None:
    assert findings_of(search_app(), "GET /tickets") == {}


def test_tenant_user_owner_account_and_a_department_header_stay_identity_parameters() -> None:
    identity = findings_of(search_app(), "GET /reports")["identity_param"]
    assert identity.message.startswith(
        "parameters 'tenant_id' (tenant), 'user_id' (user), 'owner' (user), 'account_id' (tenant), "
        "'X-Department' (department) of 'reports'")


@pytest.mark.parametrize(("name", "expected"), [
    ("account_id", ("identity_param", "tenant")),
    ("accountId", ("identity_param", "tenant")),
    ("X-Account-Id", ("identity_param", "tenant")),
    ("bank_account_id", None),
])
def test_account_ids_are_the_tenant_but_not_every_account(name: str, expected: Any) -> None:
    assert classify(name) == expected
