"""Integration with gt4py: `gt_auto_optimize` hooks and ready backends."""

from gt4py_dace_xforms.integration.hooks import chain_hooks, make_inline_hook, optimization_hooks


__all__ = ["chain_hooks", "make_inline_hook", "optimization_hooks"]
