"""The op library: each family registers its ops into `llgrad.ir.registry`."""
from . import elementwise  # noqa: F401
