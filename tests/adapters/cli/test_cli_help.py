"""Every subcommand's ``--help`` is plain text: no reStructuredText markup (double
backticks, roles such as :class:, single backticks) from the docstrings it is built from."""
from __future__ import annotations

import re

import pytest

from vecsched.adapters.cli.main import build_parser, plain

MARKUP = re.compile(r"``|:[a-z]+:`|`")


def _helps():
    ap = build_parser()
    sub = next(a for a in ap._actions if a.choices and isinstance(a.choices, dict))
    yield "vecsched", ap.format_help()
    for name, parser in sub.choices.items():
        yield name, parser.format_help()


@pytest.mark.parametrize("name,text", list(_helps()), ids=lambda x: x if len(x) < 20 else "")
def test_help_has_no_markup(name, text):
    found = [line for line in text.splitlines() if MARKUP.search(line)]
    assert not found, f"{name} --help shows markup: {found}"


def test_every_command_has_help():
    names = [n for n, _ in _helps()]
    assert {"demo", "replay", "ha-demo", "kuberay-demo", "explain", "warmup"} <= set(names)


def test_plain_strips_the_markup_the_docstrings_use():
    assert plain("``vecsched kuberay-demo --out DIR``: the scenario (``scenario.py``)") == \
        "vecsched kuberay-demo --out DIR: the scenario (scenario.py)"
    assert plain("see :class:`Plan` and `ray memory`") == "see Plan and ray memory"
    assert MARKUP.search("``x``") and MARKUP.search(":func:`f`")
