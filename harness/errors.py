"""The harness's own exceptions. Every message names the constraint, the value and the fix."""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of every error the harness raises on purpose."""


class UsageError(HarnessError):
    """Bad command-line usage: unknown op, unknown backend, a plugin that cannot be loaded.

    The CLI prints it as one line and exits with status 2.
    """


class RegistryError(HarnessError):
    """A registration the registry cannot accept (duplicate name, unknown op, bad contract)."""


class PluginError(UsageError):
    """A plugin file that does not exist or fails while being imported."""
