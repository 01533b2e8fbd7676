"""`ray.autoscaler.v2.autoscaler.Autoscaler`, wired to the simulated cloud and GCS."""
from __future__ import annotations

from queue import Queue
from typing import Optional

from ray.autoscaler.v2.instance_manager.config import AutoscalingConfig
from ray.autoscaler.v2.instance_manager.instance_manager import InstanceManager
from ray.autoscaler.v2.instance_manager.instance_storage import InstanceStorage
from ray.autoscaler.v2.instance_manager.node_provider import ICloudInstanceProvider
from ray.autoscaler.v2.instance_manager.reconciler import Reconciler
from ray.autoscaler.v2.instance_manager.storage import InMemoryStorage
from ray.autoscaler.v2.instance_manager.subscribers.cloud_instance_updater import \
    CloudInstanceUpdater
from ray.autoscaler.v2.instance_manager.subscribers.cloud_resource_monitor import \
    CloudResourceMonitor
from ray.autoscaler.v2.instance_manager.subscribers.ray_stopper import RayStopper
from ray.autoscaler.v2.scheduler import IResourceScheduler
from ray.autoscaler.v2.sdk import get_cluster_resource_state
from ray.core.generated.autoscaler_pb2 import AutoscalingState

from .gcs import SimGcs

__all__ = ["SimAutoscaler"]


class SimAutoscaler:
    """`ray.autoscaler.v2.autoscaler.Autoscaler`, wired to the simulated cloud and GCS.

    The instance manager, its storage and its subscribers are built as in
    `Autoscaler._init_instance_manager` (no `ThreadedRayInstaller`: Ray only adds it
    for `NodeProviderAdapter` providers); the scheduler is an argument instead of the
    hard-coded `ResourceDemandScheduler`. `update_autoscaling_state()` is Ray's method;
    with `strict=True` an exception propagates instead of being logged and turned into
    a lost tick (None), and `failures` counts lost ticks either way.
    """

    def __init__(self, config: AutoscalingConfig, scheduler: IResourceScheduler,
                 provider: ICloudInstanceProvider, gcs: SimGcs, *,
                 session_name: str = "vecsched-sim", strict: bool = True,
                 metrics_reporter=None):
        self.config = config
        self.scheduler = scheduler
        self.provider = provider
        self.gcs = gcs
        self.strict = strict
        self.failures: list[BaseException] = []
        self._metrics_reporter = metrics_reporter
        self._ray_stop_errors_queue: Queue = Queue()
        self._ray_install_errors_queue: Queue = Queue()
        storage = InstanceStorage(cluster_id=session_name, storage=InMemoryStorage())
        self.ray_stopper = RayStopper(gcs_client=gcs, error_queue=self._ray_stop_errors_queue)
        self.cloud_resource_monitor = CloudResourceMonitor()
        self.instance_manager = InstanceManager(
            instance_storage=storage,
            instance_status_update_subscribers=[
                CloudInstanceUpdater(cloud_provider=provider,
                                     metrics_reporter=metrics_reporter),
                self.ray_stopper,
                self.cloud_resource_monitor,
            ])

    def update_autoscaling_state(self) -> Optional[AutoscalingState]:
        try:
            ray_stop_errors = []
            while not self._ray_stop_errors_queue.empty():
                ray_stop_errors.append(self._ray_stop_errors_queue.get())
            ray_install_errors = []
            while not self._ray_install_errors_queue.empty():
                ray_install_errors.append(self._ray_install_errors_queue.get())
            ray_cluster_resource_state = get_cluster_resource_state(self.gcs)
            autoscaling_config = self.config
            return Reconciler.reconcile(
                instance_manager=self.instance_manager,
                scheduler=self.scheduler,
                cloud_provider=self.provider,
                cloud_resource_monitor=self.cloud_resource_monitor,
                ray_cluster_resource_state=ray_cluster_resource_state,
                non_terminated_cloud_instances=self.provider.get_non_terminated(),
                cloud_provider_errors=self.provider.poll_errors(),
                ray_install_errors=ray_install_errors,
                ray_stop_errors=ray_stop_errors,
                autoscaling_config=autoscaling_config,
                metrics_reporter=self._metrics_reporter,
            )
        except Exception as e:      # Ray logs it and loses the tick
            self.failures.append(e)
            if self.strict:
                raise
            return None
        finally:
            self.settle()

    def settle(self) -> None:
        """Wait for the drains `RayStopper` started on its worker thread (its executor
        has one worker, so a no-op submitted now runs after them), keeping replays
        deterministic."""
        self.ray_stopper._executor.submit(lambda: None).result()

    def instances(self):
        from ray.core.generated.instance_manager_pb2 import GetInstanceManagerStateRequest
        reply = self.instance_manager.get_instance_manager_state(
            GetInstanceManagerStateRequest())
        return list(reply.state.instances)
