"""Helpers only kernels call (``_jit.njit_inner``): lowered to LLVM IR and linked into
their callers, never optimised as a module nor made machine code on their own.

numba compiles each function it types into a code library of its own: it optimises
the library's functions, then the library as a module, makes machine code of it (to
have a function pointer) and links the optimised module into every kernel that calls
it, where the whole is optimised as a module and made machine code again. A helper
without a Python entry point never runs on its own, so its own module optimisation
and machine code were compile time spent for nothing: here its library stops after
the function passes, and the callers link it and do the rest, as they did before for
the copy they linked (numba's module passes, its reference-count pruning included,
run on the caller's module with everything linked into it). numba finds how to call
a compiled function by its entry point, so the helper gets a key (``_Unrunnable``) in
place of one. Its compile options are a kernel's: the pass sets ``no_cpython_wrapper``
after typing, so the numpy functions it calls (``np.empty``, ``np.zeros``, ...) are
the same compiled code as a kernel's (numba keeps them per caller options). Built on
numba's compiler extension point (``pipeline_class``: a ``CompilerBase`` with passes
of its own) and on its code library's internals (``JITCodeLibrary``); written against
numba 0.68; tests/engine/kernels (test_linked.py and the kernels' own tests) also pass
with numba 0.59.1, pyproject's oldest.
"""
from numba.core.codegen import JITCodeLibrary
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import LoweringPass, register_pass
from numba.core.typed_passes import AnnotateTypes, NativeLowering


class _LinkedOnlyLibrary(JITCodeLibrary):
    """A code library that is only ever linked into other libraries' modules."""

    def _optimize_final_module(self):
        pass           # its callers optimise their modules with it linked in

    def _finalize_final_module(self):
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True          # never handed to the JIT engine

    def get_pointer_to_function(self, name):
        raise TypeError(f"{self.name} is linked into kernels only; it has no machine code "
                        "of its own")


@register_pass(mutates_CFG=False, analysis_only=False)
class _LinkOnly(LoweringPass):
    """Before lowering: a library that is only linked, no function pointer asked of
    it (numba's ``no_compile``) and no Python entry point lowered."""
    _name = "vecsched_link_only"

    def __init__(self):
        LoweringPass.__init__(self)

    def run_pass(self, state):
        state.library = _LinkedOnlyLibrary(state.targetctx.codegen(),
                                           state.func_id.func_qualname)
        state.flags.no_compile = True
        state.flags.no_cpython_wrapper = True
        return True


class _Unrunnable:
    """Stands for the function pointer a helper does not have: the key under which
    its callers find how to call it (numba keys a compiled function's lowering by
    its entry point)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<{self.name}: linked into kernels only>"


@register_pass(mutates_CFG=False, analysis_only=False)
class _Register(LoweringPass):
    """After lowering: what numba's lowering does for a compiled function (register
    how to call it, with its library to link), with a key for its entry point."""
    _name = "vecsched_register_linked"

    def __init__(self):
        LoweringPass.__init__(self)

    def run_pass(self, state):
        low = state["cr"]
        key = _Unrunnable(low.fndesc.qualname)
        state.targetctx.insert_user_function(key, low.fndesc, [state.library])
        if hasattr(state.library, "_reload_init"):        # not in numba 0.59
            state.reload_init.extend(state.library._reload_init)
        state["cr"] = low._replace(cfunc=key)
        return True


class LinkedOnlyCompiler(CompilerBase):
    """numba's nopython pipeline with ``_LinkOnly`` before the lowering and
    ``_Register`` after it."""

    def define_pipelines(self):
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.add_pass_after(_LinkOnly, AnnotateTypes)
        pm.add_pass_after(_Register, NativeLowering)
        pm.finalize()
        return [pm]
