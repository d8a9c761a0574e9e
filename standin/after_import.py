"""Run a function on a module right after it is first executed: the stand-in applies its compile settings when
Dynamo is imported, and `try`'s bootstrap hooks the libraries a tried program imports.

The standard library only: the bootstrap reads this file by its path, in interpreters that cannot import this
project (`try --python`, a real device's)."""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable


class AfterImport:
    """A meta path finder that runs `hooks[name](module)` right after the module `name` is first executed."""

    def __init__(self, hooks: dict[str, Callable]) -> None:
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        # find_spec is also called by availability checks (importlib.util.find_spec) that never import: the
        # hook is consumed when the module is executed, not when it is found.
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            if self.hooks.pop(name, None) is not None:
                hook(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, hook: Callable) -> None:
    """`hook(module)` now if `name` is imported, else right after it is."""
    if name in sys.modules:
        hook(sys.modules[name])
    else:
        sys.meta_path.insert(0, AfterImport({name: hook}))
