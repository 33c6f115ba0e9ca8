"""The sandbox daemon: a small HTTP server inside every sandbox (exec, file transfer, health).

Run as ``python -m drydock.sandbox.daemon``. It imports only the standard library and h11,
because it runs in the sandbox image and starts with every sandbox; nothing here may import
other ``drydock`` modules (a test checks this).
:mod:`drydock.sandbox.daemon.protocol` spells the wire format that the backend speaks.
"""
