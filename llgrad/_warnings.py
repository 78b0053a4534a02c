"""`warn_at_user`: a warning that points at the user's line, not at llgrad's internals."""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(__file__)


def warn_at_user(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Warn with the innermost frame outside the llgrad package as the location."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
