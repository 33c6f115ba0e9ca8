from __future__ import annotations

import pytest

from drydock.config import DEFAULT_EGRESS_ALLOWLIST
from drydock.credentials.allowlist import Allowlist, AllowlistError, Reach


class TestAllowlist:
    def test_plain_host_allows_web_ports_only(self) -> None:
        allowlist = Allowlist(["pypi.org"])
        assert allowlist.allows("pypi.org", 443)
        assert allowlist.allows("PyPI.org.", 80)
        assert not allowlist.allows("pypi.org", 22)
        assert not allowlist.allows("evil-pypi.org", 443)
        assert not allowlist.allows("files.pypi.org", 443)

    def test_host_with_port(self) -> None:
        allowlist = Allowlist(["127.0.0.1:8443", "[::1]:9000"])
        assert allowlist.allows("127.0.0.1", 8443)
        assert not allowlist.allows("127.0.0.1", 443)
        assert allowlist.allows("::1", 9000)

    def test_a_tunnel_reaches_port_443_or_a_port_an_entry_names(self) -> None:
        allowlist = Allowlist(["pypi.org", "*.pythonhosted.org", "mirror.test:80"])
        assert allowlist.reach("pypi.org", 443, tunnel=True) is not None
        assert allowlist.reach("pypi.org", 80, tunnel=True) is None
        assert allowlist.reach("files.pythonhosted.org", 80, tunnel=True) is None
        assert allowlist.reach("mirror.test", 80, tunnel=True) is not None

    def test_wildcard_covers_subdomains_not_the_apex(self) -> None:
        allowlist = Allowlist(["*.pythonhosted.org"])
        assert allowlist.allows("files.pythonhosted.org", 443)
        assert not allowlist.allows("pythonhosted.org", 443)
        assert not allowlist.allows("pythonhosted.org.evil.com", 443)

    def test_a_named_host_is_reached_anywhere_and_a_wildcard_match_at_public_addresses_only(self) -> None:
        allowlist = Allowlist(["*.corp.example", "mirror.corp.example", "10.0.0.5:3128"])
        assert allowlist.reach("mirror.corp.example", 443) is Reach.ANY_ADDRESS
        assert allowlist.reach("other.corp.example", 443) is Reach.PUBLIC_ADDRESSES
        assert allowlist.reach("10.0.0.5", 3128) is Reach.ANY_ADDRESS
        assert allowlist.reach("corp.example", 443) is None

    def test_defaults_are_package_registries(self) -> None:
        allowlist = Allowlist(DEFAULT_EGRESS_ALLOWLIST)
        assert allowlist.allows("registry.npmjs.org", 443)
        assert not allowlist.allows("example.com", 443)

    @pytest.mark.parametrize("entry", ["http://pypi.org", "pypi.org:99999", "*", "pypi.org/simple"])
    def test_bad_entries_are_refused(self, entry: str) -> None:
        with pytest.raises(AllowlistError, match=r"allowlist entry|invalid port"):
            Allowlist([entry])
