"""KubeRay: Ray's autoscaler side-car against a Kubernetes API, and stand-ins to test it.

* ``sidecar.py``: what ``vecsched-monitor kuberay-autoscaler`` adds to Ray's own KubeRay
  code (patches recorded, replicas ownership conflicts, stale reads, Ray cross-check).
* ``client.py``: the side-car's subclass of Ray's Kubernetes client (reads watched,
  patches guarded); ``guard.py``: patches addressed by group name and identity with
  ``test`` ops (``guard_report.py``: what a refused guard records); ``groups.py`` and
  ``group_fields.py``: malformed groups (every field Ray's config reader parses) found
  and left out of Ray's view; ``ownership.py``: who wrote a group's ``replicas``.
  What is guaranteed and what is not: docs/kuberay.md.
* The stand-ins to test it (no real Kubernetes cluster runs here) live in
  ``adapters/sim/kube/``: the API server (``apiserver.py``, ``store.py``), the KubeRay
  operator (``operator.py``, ``raypods.py``), the local cluster and the scenarios
  (``local_cluster.py``, ``scenario.py``, ``reorder.py``, ``duplicate.py``,
  ``person_write.py``), and the audit of what landed (``wire_audit.py``);
  ``vecsched kuberay-demo`` is ``adapters/cli/kuberay.py``.
"""
