"""KubeRay: Ray's autoscaler side-car against a Kubernetes API, and stand-ins to test it.

* ``sidecar.py``: what ``vecsched-monitor kuberay-autoscaler`` adds to Ray's own KubeRay
  code (patches recorded, replicas ownership conflicts, stale reads, Ray cross-check).
* ``apiserver.py``, ``store.py``, ``selectors.py``, ``tls.py``: a loopback Kubernetes API
  server STAND-IN (no real cluster runs here).
* ``operator.py``, ``raypods.py``: a KubeRay operator STAND-IN whose pods are real Ray
  2.60 worker nodes.
* ``cluster.py``, ``scenario.py``, ``demo.py``: the local KubeRay cluster, the
  end-to-end scenario and ``vecsched kuberay-demo``.
"""
