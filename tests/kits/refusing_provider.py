"""A node provider for live-cluster tests whose cloud refuses one worker type.

Ray's own fake multi-node provider (``FakeMultiNodeProvider``: every node a local raylet)
with one change: ``create_node_with_resources_and_labels`` raises for the worker type
named in ``provider.refused_type`` of the autoscaling config, as a cloud's API raises on
an insufficient-capacity error. Ray's v2 adapter of a node provider turns the exception
into a ``LaunchNodeError`` and the instance into ALLOCATION_FAILED; every other type
launches as usual. Imported by the autoscaler (monitor) process by its module path.
"""
from __future__ import annotations

from ray.autoscaler._private.fake_multi_node.node_provider import FakeMultiNodeProvider
from ray.autoscaler.tags import TAG_RAY_USER_NODE_TYPE


class RefusingProvider(FakeMultiNodeProvider):
    def __init__(self, provider_config, cluster_name):
        super().__init__(provider_config, cluster_name)
        self.refused_type = provider_config.get("refused_type")
        self.refusals = 0

    def create_node_with_resources_and_labels(self, node_config, tags, count, resources,
                                              labels):
        if tags.get(TAG_RAY_USER_NODE_TYPE) == self.refused_type:
            self.refusals += 1
            raise RuntimeError(f"InsufficientInstanceCapacity: no capacity for "
                               f"{self.refused_type} (refusal {self.refusals})")
        return super().create_node_with_resources_and_labels(node_config, tags, count,
                                                             resources, labels)
