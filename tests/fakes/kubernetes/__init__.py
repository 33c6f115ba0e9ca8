"""``FakeKubernetes``: a test double of the parts of the Kubernetes API the sandbox provider
uses (pods: create, get, list, watch, patch, delete; secrets: create), with a fake kubelet that
really runs each pod's containers as local processes.

The kubelet maps every volume mount to a directory of its own and rewrites arguments that name
a mount path; ``python3`` is this interpreter; each pod gets its own loopback address
(``127.x.y.z``, outside ``127.0.0.0/16``) and ``0.0.0.0`` in a command means that address, so
several daemons can all listen on the daemon port. Faults a real cluster produces are switched
on per test: ``cluster.failing_images`` (ErrImagePull), ``cluster.quota_exhausted`` (403
exceeded quota), ``cluster.unschedulable``.
"""

from tests.fakes.kubernetes.server import FakeKubernetes
from tests.fakes.kubernetes.state import FakeCluster

__all__ = ["FakeCluster", "FakeKubernetes"]
