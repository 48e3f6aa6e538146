"""Load what can be verified: the op specs, the project's kernels, and plugin files."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from typing import Iterable

from harness.errors import PluginError, RegistryError, UsageError
from harness.registry.registry import REGISTRY, load_project_kernels


def module_name(path: str) -> str:
    """The name a plugin file is imported under (one per resolved path; naming no harness, which its
    kernels must not be able to tell: harness.run.neutral)."""
    resolved = str(Path(path).resolve())
    return f"plugin_{Path(path).stem}_{hashlib.sha1(resolved.encode()).hexdigest()[:8]}"


def load_plugin(path: str) -> None:
    """Import a plugin file; it registers kernels or mutants on import."""
    file = Path(path)
    if file.is_dir():
        raise PluginError(f"plugin {path} is a directory, expected a .py file")
    if not file.is_file():
        raise PluginError(f"plugin file not found: {path}")
    if file.suffix != ".py":
        raise PluginError(f"plugin {path} must be a Python file (.py)")
    resolved = str(file.resolve())
    name = module_name(path)
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    REGISTRY._loading_plugin = path
    try:
        spec.loader.exec_module(module)
    except RegistryError as exc:
        del sys.modules[name]
        raise PluginError(f"plugin {path}: {exc}") from None
    except UsageError:  # already one line that names the file at fault (harness.kernelbench's checks)
        del sys.modules[name]
        raise
    except KeyboardInterrupt:  # the user stopped the run: it stops, it is no fault of the plugin
        del sys.modules[name]
        raise
    except BaseException as exc:  # user code (sys.exit included): any failure is a clean usage error, not a traceback
        del sys.modules[name]
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == resolved]
        where = f" (line {frames[-1].lineno})" if frames else ""
        raise PluginError(f"plugin {path} failed to import{where}: {type(exc).__name__}: {exc}") from None
    finally:
        REGISTRY._loading_plugin = None


def load_all(*, plugins: Iterable[str] = (), extra_modules: Iterable[str] = (),
             library: tuple[tuple[str, ...], str] = ((), "*")) -> None:
    """The project's kernels, ``extra_modules``, the plugins, then the mutants of the library
    modules ``library[0]`` carried by the plugin kernels matching ``library[1]`` (mutate
    --mutate-module: harness.mutation.library), whose registration needs the plugins."""
    load_project_kernels()
    for module in extra_modules:
        importlib.import_module(module)
    for path in plugins:
        load_plugin(path)
    modules, carrier = library
    if modules:
        from harness.mutation import library as library_mutants

        library_mutants.register(tuple(modules), carrier)
