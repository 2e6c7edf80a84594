"""Schemathesis over every operation of the API's own OpenAPI document (bounded: a fixed number
of generated requests per operation, derandomized): no request a client can send answers 500, and
every error answer has the documented JSON shape (503 is allowed: online routes without an
online owner configured, as here). Runs against the real PostgreSQL and Redis of
the service fixtures (no workers: submitted jobs stay queued)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from litehit.settings import Settings

pytestmark = pytest.mark.service

EXAMPLES_PER_OPERATION = 12


def _check(case: Any, response: Any) -> None:
    where = f"{case.method} {case.formatted_path} {case.path_parameters} {case.query} {str(case.body)[:200]}"
    assert response.status_code < 500 or response.status_code == 503, (where, response.status_code, response.text)
    if response.status_code >= 400:
        body = response.json()
        assert set(body) == {"error"}, (where, body)
        assert isinstance(body["error"]["code"], str) and isinstance(body["error"]["message"], str), (where, body)


def test_no_generated_request_gets_a_server_error(service_settings: Settings) -> None:
    from api.main import create_app

    app = create_app(service_settings)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30  # every route of the API is fuzzed
    for operation in operations:

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def fuzz(case: Any) -> None:
            _check(case, case.call())

        fuzz()
