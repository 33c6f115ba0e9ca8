"""Label values and keys that Kubernetes accepts, whatever the caller passes."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from drydock.sandbox.providers.kubernetes import naming

VALID_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


class TestLabelValue:
    def test_valid_values_are_kept(self) -> None:
        for value in ("coder", "5f0c6a4e-1d2b-4c3a-9e8f-0a1b2c3d4e5f", "a.b_c-d", "", "x" * 63):
            assert naming.label_value(value) == value

    def test_invalid_values_are_made_valid_and_stay_distinct(self) -> None:
        email = naming.label_value("ada@example.com")
        assert VALID_VALUE.match(email)
        assert email.startswith("ada-example.com-")
        assert naming.label_value("ada@example.com") == email
        assert naming.label_value("ada#example.com") != email
        long = naming.label_value("y" * 64)
        assert len(long) <= 63
        assert long != naming.label_value("y" * 65)
        assert VALID_VALUE.match(naming.label_value("@@@"))

    @given(st.text())
    def test_any_text_becomes_a_valid_label_value(self, raw: str) -> None:
        value = naming.label_value(raw)
        assert len(value) <= 63
        assert VALID_VALUE.match(value), value


class TestKeysAndSelectors:
    def test_caller_label_keys_get_the_prefix_or_are_refused(self) -> None:
        assert naming.caller_label_key("role") == "drydock.dev/role"
        assert naming.caller_label_key("has space") is None
        assert naming.caller_label_key("-leading") is None
        assert naming.caller_label_key("k" * 64) is None

    def test_selector_and_sandbox_ids(self) -> None:
        assert naming.selector({"b": "2", "a": "1"}) == "a=1,b=2"
        assert naming.SANDBOX_SELECTOR == "app.kubernetes.io/managed-by=drydock,app.kubernetes.io/name=drydock-sandbox"
        first, second = naming.new_sandbox_id(), naming.new_sandbox_id()
        assert first != second
        assert re.fullmatch(r"sbx-[0-9a-f]{32}", first)
