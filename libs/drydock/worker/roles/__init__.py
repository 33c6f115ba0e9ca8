"""The agent roles' specs (:class:`~drydock.worker.role_spec.RoleSpec`), one module per role, so
that a worker imports only its own role's preparation: ``coder``, ``reviewer``, ``analyzer``,
each exporting ``SPEC`` and its ``TOOLS``."""
