"""Malformed dumps for ``vecsched explain``: each a function from a good dump (the parsed
JSON of the sample) to the bytes of a bad file. tests/adapters/cli/test_explain_inputs.py runs
the command on every one of them."""
from __future__ import annotations

import base64
import copy
import json
import random


def _js(doc) -> bytes:
    return json.dumps(doc).encode()


def _fields(doc) -> dict:
    return doc["request"]["fields"]


def _first_pb(doc) -> dict:
    """The first resource request row's protobuf entry."""
    return _fields(doc)["resource_requests"][0]


def _with(change):
    def make(good: dict) -> bytes:
        doc = copy.deepcopy(good)
        out = change(doc)
        return out if isinstance(out, bytes) else _js(doc)
    return make


def _pb_bytes(doc, raw: bytes) -> None:
    _first_pb(doc)["b64"] = base64.b64encode(raw).decode()


def _huge_count(doc) -> None:
    from ray.core.generated.autoscaler_pb2 import ResourceRequestByCount
    msg = ResourceRequestByCount()
    msg.ParseFromString(base64.b64decode(_first_pb(doc)["b64"]))
    msg.count = 2 ** 62
    _first_pb(doc)["b64"] = base64.b64encode(msg.SerializeToString()).decode()


def _nan_resource(doc) -> None:
    from ray.core.generated.autoscaler_pb2 import ResourceRequestByCount
    msg = ResourceRequestByCount()
    msg.ParseFromString(base64.b64decode(_first_pb(doc)["b64"]))
    msg.request.resources_bundle["CPU"] = float("nan")
    _first_pb(doc)["b64"] = base64.b64encode(msg.SerializeToString()).decode()


def _group(doc, i: int = 2) -> dict:
    """The fields of the sample's i-th worker group (2: cpu-large, with a label)."""
    return _fields(doc)["node_type_configs"]["@map"][i][1]["fields"]


def _deep(depth: int) -> bytes:
    return b'{"format": "vecsched-scheduling-request/1", "request": ' + b"[" * depth \
        + b"]" * depth + b"}"


MALFORMED = {
    "empty file": lambda good: b"",
    "not JSON": lambda good: b"tick 1: 4 nodes\n",
    "random bytes": lambda good: random.Random(0).randbytes(4096),
    "JSON but not a dump": lambda good: _js({"hello": "world"}),
    "JSON array": lambda good: _js([1, 2, 3]),
    "missing request": _with(lambda d: d.pop("request")),
    "missing fields of the request": _with(lambda d: d["request"].pop("fields")),
    "missing a request field": _with(lambda d: _fields(d).pop("node_type_configs")),
    "missing b64": _with(lambda d: _first_pb(d).pop("b64")),
    "bad base64": _with(lambda d: _first_pb(d).__setitem__("b64", "%%%not base64%%%")),
    "random bytes as a message": _with(
        lambda d: _pb_bytes(d, random.Random(1).randbytes(64))),
    "unknown message type": _with(lambda d: _first_pb(d).__setitem__("@pb", "ray.rpc.Nope")),
    "class outside ray": _with(lambda d: d["request"].__setitem__("@dc", "os:system")),
    "unknown ray class": _with(
        lambda d: d["request"].__setitem__("@dc", "ray.autoscaler:NoSuchThing")),
    "unknown ray module": _with(lambda d: d["request"].__setitem__("@dc", "ray.nope:Thing")),
    "NaN timeout": lambda good: _js(good).replace(b'"idle_timeout_s": 60.0',
                                                  b'"idle_timeout_s": NaN'),
    "tagged NaN max_num_nodes": _with(
        lambda d: _fields(d).__setitem__("max_num_nodes", {"@float": "nan"})),
    "NaN resource quantity": _with(_nan_resource),
    "huge count": _with(_huge_count),
    "huge max_num_nodes": _with(lambda d: _fields(d).__setitem__("max_num_nodes", 10 ** 30)),
    "huge max workers": _with(lambda d: _fields(d)["node_type_configs"]["@map"][1][1]
                              ["fields"].__setitem__("max_worker_nodes", 10 ** 40)),
    "negative max workers": _with(lambda d: _fields(d)["node_type_configs"]["@map"][1][1]
                                  ["fields"].__setitem__("max_worker_nodes", -3)),
    "deeply nested JSON": lambda good: _deep(100_000),
    "nested deeper than the parser": lambda good: _deep(5_000),
    "nested deeper than the decoder": lambda good: _deep(700),
    "wrong type: request is a number": _with(lambda d: d.__setitem__("request", 5)),
    "wrong type: requests not a list": _with(
        lambda d: _fields(d).__setitem__("resource_requests", {"@map": []})),
    "wrong type: a row is a string": _with(
        lambda d: _fields(d)["resource_requests"].__setitem__(0, "CPU: 4")),
    "wrong type: timeout is a string": _with(
        lambda d: _fields(d).__setitem__("idle_timeout_s", "60")),
    "wrong type: @pb is a number": _with(lambda d: _first_pb(d).__setitem__("@pb", 7)),
    "wrong type: map entry": _with(
        lambda d: _fields(d)["node_type_configs"].__setitem__("@map", [[1, 2, 3]])),
    "wrong type: context": _with(lambda d: d.__setitem__("context", [1])),
    "wrong type: upscaling speed": _with(
        lambda d: d["context"].__setitem__("upscaling_speed", "fast")),
    "unknown tag": _with(lambda d: _fields(d).__setitem__("max_num_nodes", {"@what": 1})),
    "wrong type: resource name a number": _with(
        lambda d: _group(d)["resources"]["@map"][0].__setitem__(0, 7)),
    "wrong type: resource quantity a string": _with(
        lambda d: _group(d)["resources"]["@map"][0].__setitem__(1, "32")),
    "wrong type: label name a number": _with(
        lambda d: _group(d)["labels"]["@map"][0].__setitem__(0, 3)),
}
