"""Phase II: a question -> its connected evidence graph, with no LLM call.

The read path as stages, each a small function over one typed candidate set
(:class:`~.pool.Pool`), wired in one direction by :mod:`.pipeline`:

=============  ==================================================================  ============================
stage          what it does                                                        module (Config)
=============  ==================================================================  ============================
fast paths     counters ("how many times") and attribute look-ups, no search       ``fastpaths`` (enable_fastpaths)
question       the question read once: vectors, persons, period, words             ``query``, ``periods``
channels       dense, lexical and period candidates                                ``channels`` (k_sem, k_lex, k_period)
fusion         one score per candidate: match x weights                            ``fusion`` (lexical_weight, ...)
expansion      message mates, bridges, older and newer states                      ``expansion``, ``bridges``
paths          DFS reasoning paths over the candidates                             ``paths`` (enable_paths)
budget         node and token budget; long entries as excerpts                     ``budget``, ``excerpt``
=============  ==================================================================  ============================

The evidence graph it returns serializes itself (``serialize.py``); the budget asks the
serializer what a line costs.
"""

from .pipeline import build_evidence_graph
from .pool import Candidate, Pool
from .query import Question, read_question

__all__ = ["Candidate", "Pool", "Question", "build_evidence_graph", "read_question"]
