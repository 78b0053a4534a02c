"""Graph passes: every pass is `Graph -> Graph`, except fusion and memory planning, which
describe how a graph is run (kernel groups, buffer offsets)."""

from . import fusion, memory  # noqa: F401
from .rewrite import Match, Pat, Rule, RewriteError, const_pat, pat, rewrite, var  # noqa: F401
from .simplify import SIMPLIFY_RULES, simplify  # noqa: F401
from .fold import FOLD_RULES, fold  # noqa: F401
from .cse import cse  # noqa: F401
from .dce import dce  # noqa: F401
from .manager import (
    PIPELINE,
    Pass,
    PassError,
    PipelineResult,
    Stage,  # noqa: F401
    make_pass,
    run_pipeline,
)
