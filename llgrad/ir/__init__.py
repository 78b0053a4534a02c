"""llgrad's IR: dtypes, types, the op registry, graphs, and their text form."""

from . import dtypes, registry
from .dtypes import DType
from .graph import Builder, Graph, Node
from .registry import Group, OpDef
from .types import TensorType

__all__ = [
    "dtypes",
    "registry",
    "DType",
    "Builder",
    "Graph",
    "Node",
    "Group",
    "OpDef",
    "TensorType",
]
from .interpret import interpret
from .parser import parse
from .printer import print_graph
from .verify import verify

__all__ += ["parse", "verify", "interpret", "print_graph"]
