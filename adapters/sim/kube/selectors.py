"""Kubernetes label selectors (the ``labelSelector`` query parameter), parsed and matched.

Grammar as the API server accepts it: comma-separated requirements, each one of
``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k`` (exists) and
``!k`` (does not exist). A malformed selector raises :class:`SelectorError`, which
the stand-in answers with 400 like the real server.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List

_SET = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s!=,()]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*$")


class SelectorError(ValueError):
    pass


def _split(selector: str) -> List[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' in label selector {selector!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorError(f"unbalanced '(' in label selector {selector!r}")
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def parse(selector: str) -> Callable[[Dict[str, str]], bool]:
    """A predicate over a label dict; the empty selector matches everything."""
    reqs = []
    for part in _split(selector or ""):
        m = _SET.match(part)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            reqs.append((lambda k, vs: (lambda L: L.get(k) in vs))(key, vals) if op == "in"
                        else (lambda k, vs: (lambda L: L.get(k) not in vs))(key, vals))
            continue
        m = _EQ.match(part)
        if m:
            key, op, val = m.groups()
            reqs.append((lambda k, v: (lambda L: L.get(k) == v))(key, val) if op != "!="
                        else (lambda k, v: (lambda L: L.get(k) != v))(key, val))
            continue
        m = _EXISTS.match(part)
        if m:
            neg, key = m.groups()
            reqs.append((lambda k: (lambda L: k not in L))(key) if neg
                        else (lambda k: (lambda L: k in L))(key))
            continue
        raise SelectorError(f"unable to parse requirement {part.strip()!r} of label "
                            f"selector {selector!r}")
    return lambda labels: all(r(labels) for r in reqs)
