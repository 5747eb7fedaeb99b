"""schemathesis runs the gateway's own OpenAPI spec against the running gateway (real Triton behind it).

The spec is the app's (`create_app().openapi()`, built without starting anything, so the tests exist at
collection time; schemathesis's lazy `from_fixture` loader does not run under pytest 9), and a test checks
that the running gateway serves exactly that spec at /openapi.json. Every generated request goes over HTTP
to the gateway process started by the `gateway` fixture.

Bounded and reproducible: 25 generated examples per operation, derandomized, plus schemathesis's explicit
examples and coverage cases (boundary and off-schema bodies). Checked: no 5xx, every status code and content
type is one the spec declares, and every response body matches its declared schema.
"""

from __future__ import annotations

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from gateway import Settings, create_app
from tests.support.gateway import MODEL_ALIASES

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SPEC = create_app(Settings(model_aliases=MODEL_ALIASES)).openapi()
schema = schemathesis.openapi.from_dict(SPEC)


def test_the_gateway_serves_this_spec(gateway):
    assert requests.get(f"{gateway.url}/openapi.json", timeout=10).json() == SPEC


def _operation_test(method: str, path: str):
    @schema.include(method=method, path=path).parametrize()
    @settings(
        max_examples=25,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def test(case, gateway):
        case.call_and_validate(base_url=gateway.url, checks=CHECKS, timeout=60)

    return test


# One test function per operation (test_the_gateway_keeps_its_openapi_spec_post_v1_rerank, ...): on pytest 9 the
# items schemathesis generates from one function share one node id, and pytest-xdist, which hands out work by node
# id, would run only the first of them.
for _operation in (result.ok() for result in schema.get_all_operations()):
    _slug = f"{_operation.method.lower()}_{_operation.path.strip('/').replace('/', '_')}"
    globals()[f"test_the_gateway_keeps_its_openapi_spec_{_slug}"] = _operation_test(_operation.method, _operation.path)
