"""How the running CPython sums floats, so kernels can sum as Ray does.

Ray computes its utilisation score and victim order with the builtin ``sum()``
of Python floats. Up to 3.11 that is a plain left-to-right sum; from 3.12 on
(gh-100425) CPython compensates it (Neumaier's improved Kahan-Babuska
algorithm) and adds the compensation once at the end, so the same terms in the
same order may round differently in the last bit - enough to flip a tie between
two nodes. The engine runs in Ray's interpreter, so it follows that one.
"""
import sys

COMPENSATED = sys.version_info >= (3, 12)     # builtin sum() of floats is Neumaier's
