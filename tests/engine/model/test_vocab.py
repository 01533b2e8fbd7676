"""vecsched.engine.model.vocab: names numbered in first-seen order, and a
vocabulary's names put in another order without being checked again."""
from __future__ import annotations

import pytest

from vecsched.engine.model.vocab import Vocab


def test_reordered_numbers_the_same_names_in_the_given_order():
    v = Vocab(["a", "b", "c"])
    r = v.reordered(["c", "a", "b"])
    assert (r.names, r["c"], r["a"], r["b"]) == (("c", "a", "b"), 0, 1, 2)
    assert v.names == ("a", "b", "c")          # the original is unchanged
    r.add("d")
    assert (r["d"], "d" in v) == (3, False)


@pytest.mark.parametrize("names", [["a", "b"], ["a", "b", "c", "d"], ["a", "a", "b"],
                                   ["a", "b", "x"]])
def test_reordered_refuses_other_names(names):
    with pytest.raises(ValueError):
        Vocab(["a", "b", "c"]).reordered(names)


def test_reordered_keeps_whether_empty_names_are_allowed():
    v = Vocab(["", "x"], allow_empty=True).reordered(["x", ""])
    assert v.names == ("x", "")
    with pytest.raises(ValueError):
        Vocab(["x"]).reordered(["x"]).add("")
