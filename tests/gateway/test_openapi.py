"""schemathesis runs the gateway's own OpenAPI spec against the running gateway (real Triton behind it).

Bounded and reproducible: 25 generated examples per operation, derandomized, plus schemathesis's explicit
examples and coverage cases (boundary and off-schema bodies). Checked: no 5xx, every status code and content
type is one the spec declares, and every response body matches its declared schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="session")
def gateway_schema(gateway):
    return schemathesis.openapi.from_url(f"{gateway.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("gateway_schema")


@schema.parametrize()
@settings(
    max_examples=25,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_the_gateway_keeps_its_openapi_spec(case):
    case.call_and_validate(checks=CHECKS, timeout=60)
