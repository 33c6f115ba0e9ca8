"""Test doubles of services that cannot be reached from here (GitHub, Slack, Linear, model
providers), faithful to the real APIs' shapes, status codes and signatures."""
