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
import binascii
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
    if not isinstance(name, str):
        raise DumpError(f"class name {name!r:.40}: expected a string")
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


class _Bad(Exception):
    """A malformed value inside a dump; ``where`` collects its place on the way out."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message, self.where = message, []

    def at(self, part: str) -> "_Bad":
        self.where.append(part)
        return self

    def text(self) -> str:
        return "request" + "".join(reversed(self.where)) + ": " + self.message


_LEAF_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, ImportError,
                AssertionError)          # Ray's dataclasses assert their invariants


def _dec(x: Any):
    """A decoded value; a malformed one raises ``_Bad`` naming its place."""
    if isinstance(x, list):
        out = []
        for i, v in enumerate(x):
            try:
                out.append(_dec(v))
            except _Bad as e:
                raise e.at(f"[{i}]") from None
        return out
    if not isinstance(x, dict):
        return x
    try:
        return _dec_tagged(x)
    except _Bad:
        raise
    except DumpError as e:
        raise _Bad(str(e)) from None
    except _LEAF_ERRORS as e:
        raise _Bad(_leaf_message(x, e)) from None


def _leaf_message(x: dict, e: Exception) -> str:
    tag = next((k for k in ("@pb", "@dc", "@map", "@tuple", "@float", "@enum") if k in x),
               None)
    what = f"a {tag} value" if tag else "a value"
    if isinstance(e, KeyError):
        return f"{what} lacks its {e} field"
    detail = " ".join(str(e).split())[:200] or "it fails the class's own checks"
    return f"{what} is malformed ({type(e).__name__}: {detail})"


def _dec_tagged(x: dict):
    from google.protobuf.message import DecodeError

    if "@pb" in x:
        if not isinstance(x["@pb"], str) or not isinstance(x["b64"], str):
            raise _Bad("@pb and b64 must be strings")
        msg = _message_class(x["@pb"])()
        try:
            msg.ParseFromString(base64.b64decode(x["b64"], validate=True))
        except (binascii.Error, ValueError):
            raise _Bad(f"b64 of a {x['@pb']} is not base64") from None
        except DecodeError:
            raise _Bad(f"b64 does not hold a {x['@pb']} message") from None
        return msg
    if "@dc" in x:
        cls = _cls(x["@dc"])
        if not dataclasses.is_dataclass(cls) or not isinstance(x["fields"], dict):
            raise _Bad(f"@dc {x['@dc']!r} is not a dataclass with a dict of fields")
        fields = {}
        for k, v in x["fields"].items():
            try:
                fields[k] = _dec(v)
            except _Bad as e:
                raise e.at(f".{k}") from None
        init = {f.name for f in dataclasses.fields(cls) if f.init}
        obj = cls(**{k: v for k, v in fields.items() if k in init})
        for k, v in fields.items():
            if k not in init:
                object.__setattr__(obj, k, v)
        return obj
    if "@map" in x:
        out = {}
        for i, (k, v) in enumerate(x["@map"]):
            try:
                out[_dec(k)] = _dec(v)
            except _Bad as e:
                raise e.at(f"[{k!r:.40}]" if isinstance(k, (str, int)) else f"[{i}]") from None
        return out
    if "@tuple" in x:
        return tuple(_dec(x["@tuple"]))
    if "@float" in x:
        return float(x["@float"])
    if "@enum" in x:
        cls = _cls(x["@enum"])
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise _Bad(f"@enum {x['@enum']!r} is not an enum")
        return cls[x["name"]]
    raise _Bad(f"unknown tagged value with keys {sorted(x)[:5]}")


def dump_request(request, path: str, context: Optional[dict] = None) -> str:
    """Write ``request`` (a ``SchedulingRequest``) to ``path``, atomically; ``context``
    is optional JSON data kept beside it (e.g. ``upscaling_speed``). Returns ``path``."""
    import ray

    doc = {"format": FORMAT, "ray_version": ray.__version__,
           "context": context or {}, "request": _enc(request)}
    return write_json(path, doc, separators=(",", ":"))


def load_dump(path: str) -> dict:
    """The whole file: ``{"request": SchedulingRequest, "context": dict, "ray_version": str}``.
    A file that is not a well-formed dump raises ``DumpError`` naming the bad field."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (ValueError, UnicodeDecodeError) as e:
        raise DumpError(f"{path}: not JSON ({e})") from None
    except RecursionError:
        raise DumpError(f"{path}: JSON nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DumpError(f"{path}: not a dumped SchedulingRequest (format "
                        f"{doc.get('format') if isinstance(doc, dict) else None!r}, "
                        f"expected {FORMAT!r})")
    if "request" not in doc:
        raise DumpError(f"{path}: no 'request' field")
    context = doc.get("context") or {}
    if not isinstance(context, dict):
        raise DumpError(f"{path}: context: expected a JSON object, got "
                        f"{type(context).__name__}")
    try:
        request = _dec(doc["request"])
    except _Bad as e:
        raise DumpError(f"{path}: {e.text()}") from None
    except RecursionError:
        raise DumpError(f"{path}: request: nested too deeply") from None
    return {"request": request, "context": context, "ray_version": doc.get("ray_version")}


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
                ctx = dict(context() if context else {})
                ctx.update(_capacity_context(self))
                dump_request(request, os.path.join(self._dump_dir, f"tick-{n:06d}.json"),
                             ctx or None)
            except Exception:
                if not getattr(self, "_dump_failed", False):
                    logger.exception("vecsched: cannot dump the request to %s",
                                     self._dump_dir)
                self._dump_failed = True
            return super().schedule(request)

    Dumping.__name__ = cls.__name__
    Dumping.__qualname__ = cls.__qualname__
    return Dumping


def _capacity_context(sched) -> dict:
    """The scheduler's limits and the groups its availability memory holds out before
    the tick (``vecsched explain`` words demand held back by them)."""
    out = {}
    if getattr(sched, "engine_mode", "ray-compat") != "ray-compat":
        out["engine_mode"] = sched.engine_mode
    lim = getattr(sched, "limits", None)
    if lim is not None and not lim.empty:
        out["limits"] = {"total": dict(lim.total), "per_group": dict(lim.per_group),
                         "prices": dict(lim.prices)}
    mem = getattr(sched, "memory", None)
    if mem is not None:
        held = sorted(mem.unavailable(sched._now_ns() / 1e9))
        if held:
            out["held_out"] = held
    return out


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
