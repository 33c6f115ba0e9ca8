"""Sandboxes: one isolated environment per thread, reached through the sandbox daemon.

The path a call takes: :mod:`drydock.sandbox.lifecycle` (which sandbox serves a thread) →
:mod:`drydock.sandbox.provider` (create, connect, delete, list; one module per provider under
:mod:`drydock.sandbox.providers`) → :mod:`drydock.sandbox.backend` (the deepagents backend) →
the daemon (:mod:`drydock.sandbox.daemon`), which runs inside the sandbox.

This package module imports nothing on purpose: the daemon runs as
``python -m drydock.sandbox.daemon`` inside the sandbox image, where only the standard library
is guaranteed.
"""
