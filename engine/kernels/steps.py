"""Python entry points to single steps of the kernels, for the packer's slow
twin (engine/raycompat/packer.py with ``Packer.kernel = False``) and the tests.

The steps themselves are compiled without a Python entry point (_jit.njit_inner:
the kernels call them, and a Python wrapper for each costs compile time at
every cold start); these wrappers are compiled only when first called, which a
production tick never does.
"""
from ._jit import njit, njit_leaf
from .fit import _fit_count, _take
from .listorder import _list_order, _placed
from .nodeclass import _class_table
from .pack import _commit
from .pendclass import _firsts, _join_head, _join_tail, _leave, _pend_classes, _pend_room
from .runclass import _run_classes
from .pick import _invalidate, _pick_core
from .score import _score
from .sort import _sort_by


@njit_leaf
def pick_once(cs, n, cl, ps, runs, left, scr):
    """pick._pick_core"""
    return _pick_core(cs, n, cl, ps, runs, left, scr)


@njit_leaf
def commit_once(m, ps, runs, left, taken):
    """pack._commit"""
    return _commit(m, ps, runs, left, taken)


@njit_leaf
def invalidate_once(cs, n, changed, nchanged, old_left, new_left):
    """pick._invalidate"""
    _invalidate(cs, n, changed, nchanged, old_left, new_left)


@njit_leaf
def fit_count_once(free, exact, qty, cols, ncols, limit):
    """fit._fit_count"""
    return _fit_count(free, exact, qty, cols, ncols, limit)


@njit_leaf
def take_once(free, present, exact, qty, cols, ncols, k):
    """fit._take"""
    _take(free, present, exact, qty, cols, ncols, k)


@njit_leaf
def score_once(total, order, free, present, placed_res, placed_gpu, gpu_col, conserve_gpu):
    """score._score"""
    return _score(total, order, free, present, placed_res, placed_gpu, gpu_col, conserve_gpu)


@njit_leaf
def sort_once(idx, key, tmp):
    """sort._sort_by"""
    _sort_by(idx, key, tmp)


@njit_leaf
def placed_once(lo, won, nw, hs, g, mark, won_in, status, new, nnew, rc, base, markc):
    """listorder._placed"""
    _placed(lo, won, nw, hs, g, mark, won_in, status, new, nnew, rc, base, markc)


@njit_leaf
def join_once(pc, c, m, at_head, tab, rep, rq):
    """pendclass._join_head (at_head) or _join_tail"""
    if at_head:
        _join_head(pc, c, m, tab, rep, rq)
    else:
        _join_tail(pc, c, m, tab, rep, rq)


@njit_leaf
def leave_once(pc, c, m):
    """pendclass._leave"""
    _leave(pc, c, m)


@njit_leaf
def firsts_once(pc, shapes, g, out):
    """pendclass._firsts"""
    return _firsts(pc, shapes, g, out)


@njit
def list_order_once(nodes, status, Mcap, cap):
    """listorder._list_order"""
    return _list_order(nodes, status, Mcap, cap)


@njit
def pend_classes_once(C, Mcap, S):
    """pendclass._pend_classes"""
    return _pend_classes(C, Mcap, S)


@njit
def pend_room_once(pc, C, k):
    """pendclass._pend_room"""
    return _pend_room(pc, C, k)


@njit
def run_classes_once(running, ps, Mcap, tab, lm, need):
    """runclass._run_classes"""
    return _run_classes(running, ps, Mcap, tab, lm, need)


@njit
def class_table_once(n, R, L):
    """nodeclass._class_table"""
    return _class_table(n, R, L)
