"""A torch reference problem made to fit the machine and kept within the op's domain."""

from harness.reference.sizing import Scaling, fit

__all__ = ["Scaling", "fit"]
