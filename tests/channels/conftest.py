"""The channel contract runs deliveries through the real ingress: its fixtures are shared here."""

from tests.ingress.conftest import repo, start_ingress

__all__ = ["repo", "start_ingress"]
