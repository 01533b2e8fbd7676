"""Save and load one tick's ``SchedulingRequest`` (for ``vecsched explain`` and bug reports).

A ``SchedulingRequest`` is a dataclass holding dataclasses (``NodeTypeConfig``,
``AutoscalerInstance``, IPPR specs), protobuf messages and plain values. The file is
JSON: every protobuf message as its serialised bytes (base64) with its type, every
dataclass by its class and fields, dicts as ordered (key, value) pairs (keys need not
be strings), tuples and non-finite floats tagged. A protobuf repeated field held
directly by the request (the GCS reply's lists) comes back as a Python list of the
same messages, and a protobuf map container as a dict. Loading rebuilds objects that compare
equal field by field and message by message (``==``), list order included.

Not kept: the iteration order of protobuf *map* fields (resource maps of a node
state). Protobuf defines maps as unordered and upb iterates them in hash-table order,
which parsing does not reproduce; Ray sums some of those maps in iteration order, so a
decision that hinges on the last bit of a float sum could in principle differ on a
reloaded request. Classes are imported only from ``ray.`` modules.

The monitor (``vecsched-monitor``, the ``ray start`` hook, the KubeRay side-car) dumps
every tick's request when ``VECSCHED_DUMP_DIR`` is set: ``DIR/tick-000001.json`` ...
"""
from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from vecsched.adapters.files import write_json

FORMAT = "vecsched-scheduling-request/1"
ENV_DUMP_DIR = "VECSCHED_DUMP_DIR"
_ALLOWED = ("ray.",)


class DumpError(ValueError):
    """A file that is not a dumped SchedulingRequest (the message says what is wrong)."""


def _name(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _cls(name: str):
    mod, _, qual = name.partition(":")
    if not mod.startswith(_ALLOWED):
        raise DumpError(f"class {name!r}: only classes from ray.* modules are loaded")
    obj = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _message_class(full_name: str):
    """A protobuf message class by its full name, from Ray's generated modules."""
    from google.protobuf import descriptor_pool, message_factory
    from ray.core.generated import (autoscaler_pb2, common_pb2,  # noqa: F401 (register)
                                    instance_manager_pb2)

    try:
        desc = descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        raise DumpError(f"unknown protobuf message type {full_name!r}") from None
    return message_factory.GetMessageClass(desc)


def _enc(x: Any):
    from google.protobuf.message import Message

    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, enum.Enum):
        return {"@enum": _name(type(x)), "name": x.name}
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"@float": repr(x)}
    if isinstance(x, Message):
        return {"@pb": x.DESCRIPTOR.full_name,
                "b64": base64.b64encode(x.SerializeToString(deterministic=False)).decode()}
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {"@dc": _name(type(x)),
                "fields": {f.name: _enc(getattr(x, f.name)) for f in dataclasses.fields(x)}}
    if isinstance(x, Mapping):             # dicts, and protobuf map containers
        return {"@map": [[_enc(k), _enc(v)] for k, v in x.items()]}
    if isinstance(x, tuple):
        return {"@tuple": [_enc(v) for v in x]}
    if isinstance(x, (list, Sequence)) and not isinstance(x, (str, bytes)):
        return [_enc(v) for v in x]        # lists, and protobuf repeated containers
    raise DumpError(f"cannot serialise a {type(x).__name__} ({x!r:.80})")


def _dec(x: Any):
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if not isinstance(x, dict):
        return x
    if "@pb" in x:
        msg = _message_class(x["@pb"])()
        msg.ParseFromString(base64.b64decode(x["b64"]))
        return msg
    if "@dc" in x:
        cls = _cls(x["@dc"])
        fields = {k: _dec(v) for k, v in x["fields"].items()}
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        obj = cls(**{k: v for k, v in fields.items() if k in init})
        for k, v in fields.items():
            if k not in init:
                object.__setattr__(obj, k, v)
        return obj
    if "@map" in x:
        return {_dec(k): _dec(v) for k, v in x["@map"]}
    if "@tuple" in x:
        return tuple(_dec(v) for v in x["@tuple"])
    if "@float" in x:
        return float(x["@float"])
    if "@enum" in x:
        return _cls(x["@enum"])[x["name"]]
    raise DumpError(f"unknown tagged value with keys {sorted(x)}")


def dump_request(request, path: str, context: Optional[dict] = None) -> str:
    """Write ``request`` (a ``SchedulingRequest``) to ``path``, atomically; ``context``
    is optional JSON data kept beside it (e.g. ``upscaling_speed``). Returns ``path``."""
    import ray

    doc = {"format": FORMAT, "ray_version": ray.__version__,
           "context": context or {}, "request": _enc(request)}
    return write_json(path, doc, separators=(",", ":"))


def load_dump(path: str) -> dict:
    """The whole file: ``{"request": SchedulingRequest, "context": dict, "ray_version": str}``."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except ValueError as e:
        raise DumpError(f"{path}: not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DumpError(f"{path}: not a dumped SchedulingRequest (format "
                        f"{doc.get('format') if isinstance(doc, dict) else None!r}, "
                        f"expected {FORMAT!r})")
    return {"request": _dec(doc["request"]), "context": doc.get("context") or {},
            "ray_version": doc.get("ray_version")}


def load_request(path: str):
    """The ``SchedulingRequest`` saved by :func:`dump_request`."""
    return load_dump(path)["request"]


def with_dumps(cls: type, directory: str,
               context: Optional[Callable[[], dict]] = None) -> type:
    """A subclass of the installed scheduler class that dumps each tick's request to
    ``directory/tick-NNNNNN.json`` before scheduling it (a failed dump is logged once
    and never fails the tick)."""
    import logging

    logger = logging.getLogger(__name__)

    class Dumping(cls):
        _dump_dir = directory
        _dumped = 0

        def schedule(self, request):
            n = type(self)._dumped = type(self)._dumped + 1
            try:
                dump_request(request, os.path.join(self._dump_dir, f"tick-{n:06d}.json"),
                             context() if context else None)
            except Exception:
                if not getattr(self, "_dump_failed", False):
                    logger.exception("vecsched: cannot dump the request to %s",
                                     self._dump_dir)
                self._dump_failed = True
            return super().schedule(request)

    Dumping.__name__ = cls.__name__
    Dumping.__qualname__ = cls.__qualname__
    return Dumping


def install_dumps(context: Optional[Callable[[], dict]] = None) -> Optional[type]:
    """If ``VECSCHED_DUMP_DIR`` is set and the engine is installed in this process, make
    the autoscaler's scheduler dump every request there. Returns the new class."""
    directory = os.environ.get(ENV_DUMP_DIR)
    if not directory:
        return None
    import ray.autoscaler.v2.autoscaler as autoscaler_module

    from .install import installed

    cls = installed()
    if cls is None:
        return None
    new = with_dumps(cls, directory, context)
    autoscaler_module.ResourceDemandScheduler = new
    return new


def monitor_context(config_path: Optional[str]) -> dict:
    """The launch limits in force for a ``vecsched-monitor`` / ``ray start`` autoscaler:
    ``upscaling_speed`` from its autoscaling config file, Ray's concurrent-launch cap."""
    from ray.autoscaler._private.constants import (AUTOSCALER_MAX_CONCURRENT_LAUNCHES,
                                                   DEFAULT_UPSCALING_SPEED)

    out = {"max_concurrent_launches": AUTOSCALER_MAX_CONCURRENT_LAUNCHES, "source": "config"}
    speed = DEFAULT_UPSCALING_SPEED
    if config_path:
        try:
            import yaml
            with open(config_path) as f:
                speed = (yaml.safe_load(f) or {}).get("upscaling_speed", speed)
        except Exception:
            pass
    out["upscaling_speed"] = speed
    return out
