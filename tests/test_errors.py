from __future__ import annotations

import httpx

from drydock.errors import describe


class TestDescribe:
    def test_an_error_with_a_message_is_its_message(self) -> None:
        assert describe(ValueError("no such repository")) == "no such repository"

    def test_an_error_without_one_is_named_by_its_type(self) -> None:
        assert describe(httpx.PoolTimeout("")) == "PoolTimeout"
        assert describe(TimeoutError()) == "TimeoutError"
