"""Heavy modules that libraries import but our code paths never touch, bound lazily.

Each name is bound with the standard library's ``importlib.util.LazyLoader``: the module is
registered and set as its package's attribute, but its code runs only the first time anything
reads one of its attributes — transparently, so a caller that does use it gets the real module.

This only spares a module that is reached as a package attribute (``from scipy import stats``,
``from numpy import *``, ``getattr(numpy, "f2py")``); a plain ``import package.module`` of a
lazy module reads its ``__spec__`` and so loads it at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

# scipy.stats: statsmodels.stats.inter_rater does `from scipy import stats` only for the
# normal-distribution p-values of its results objects, which we never ask for; the import costs
# ~0.9 s (docstring processing) on the 2-core machines this runs on.
# numpy.f2py, numpy.testing: scipy's vendored array-api-compat copies numpy's namespace with
# `from numpy import *` and getattr over dir(numpy), which imports every lazy numpy submodule;
# these two (a Fortran wrapper generator and the test helpers) cost ~0.1 s together, and
# scipy.linalg and scipy.sparse, which statsmodels and the metrics use, never need them.
UNUSED_BY_US = ("scipy.stats", "numpy.f2py", "numpy.testing")


def bind_lazily(name: str) -> None:
    """Register ``name`` as a lazy module unless it is already imported (or not installed)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    # `from scipy import stats` and `from numpy import *` read the package attribute
    setattr(importlib.import_module(parent), child, module)


def spare_unused_modules() -> None:
    """Bind :data:`UNUSED_BY_US` lazily; call it just before importing statsmodels or scipy."""
    for name in UNUSED_BY_US:
        bind_lazily(name)
