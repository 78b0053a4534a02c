"""The op library: each family registers its ops into `llgrad.ir.registry`."""

from . import elementwise  # noqa: F401
from . import shape  # noqa: F401
from . import generate  # noqa: F401
from . import core  # noqa: F401
from . import indexing  # noqa: F401
from . import linalg  # noqa: F401
from . import reduction  # noqa: F401
from . import composite  # noqa: F401
from . import scan  # noqa: F401
from . import nn  # noqa: F401
from . import collective  # noqa: F401
