"""An SDK's type packages imported without running their `__init__` until a name of it is used.

A provider SDK's `types` package imports every model of its whole API in its `__init__`. The
OpenAI SDK's client imports `openai.types` (batches, evals, graders, realtime...) and, through
one tool helper, `openai.types.responses`: 380 of the 913 modules its import loads, and about
half its 0.3 s, which a prompt sent straight after `session/new` waited for. A chat completion
uses a few of its submodules (`openai.types.chat.chat_completion_chunk`), each imported by name.

`install(prefix)` makes every package under `prefix` lazy: importing it runs nothing, and
- its submodules import as usual (`import openai.types.chat`, `from openai.types import chat`),
  without its `__init__`;
- the first use of any other name of it (`openai.types.Batch`, `from openai.types import *`)
  runs its `__init__` in the module, once, as the import would have: nothing is left out, only
  later. A thread that asks while another runs it waits for it.

The one difference a caller can see is when an `__init__` runs, never what it defines, with two
exceptions: an `__init__` that binds a submodule's name to something else (`from .x import x`),
where `pkg.x` would be the submodule until a name is used, and one that defines a dunder name
other than `__all__` (`__version__`), answered as missing until then (tools probe modules for
such names: `__wrapped__`, `__signature__`; running the `__init__` for each would undo the
point). The SDKs' packages have neither; a test holds them to it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_prefixes: set[str] = set()
_lock = threading.Lock()


def install(prefix: str) -> None:
    """Packages named `prefix` or under it, imported from now on, run their `__init__` on first
    use of a name that is not a submodule."""
    with _lock:
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
        _prefixes.add(prefix)


def _wanted(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in _prefixes)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the package as the other finders do, and wraps its loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not _wanted(fullname):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            loader = spec.loader
            if spec.submodule_search_locations is None or not isinstance(
                loader, importlib.machinery.SourceFileLoader | importlib.machinery.SourcelessFileLoader
            ):
                return spec
            spec.loader = _LazyLoader(loader)
            return spec
        return None


class _LazyLoader(importlib.abc.Loader):
    """The package's own loader, its `exec_module` deferred to the first name used."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, get_code...
        return getattr(self._loader, name)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__getattr__ = _Pending(module, self._loader)  # type: ignore[method-assign]


class _Pending:
    """The lazy package's module `__getattr__` until its `__init__` has run."""

    def __init__(self, module: ModuleType, loader: Any) -> None:
        self._module, self._loader = module, loader
        self._runner: int | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, name: str) -> Any:
        module = self._module
        if name.startswith("__") and name != "__all__":
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        if self._runner is None and _is_submodule(module, name):
            return importlib.import_module(f"{module.__name__}.{name}")
        self._run()
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

    def _run(self) -> None:
        me = threading.get_ident()
        with self._lock:
            first = self._runner is None
            if first:
                self._runner = me
        if first:
            try:
                self._loader.exec_module(self._module)
            finally:
                self._module.__dict__.pop("__getattr__", None)
                self._done.set()
        elif self._runner != me:  # the `__init__` itself asks (`from . import x`): as in an import
            self._done.wait()


def _is_submodule(module: ModuleType, name: str) -> bool:
    for base in getattr(module, "__path__", ()):
        if os.path.isfile(os.path.join(base, name + ".py")) or os.path.isfile(
            os.path.join(base, name, "__init__.py")
        ):
            return True
    return False
