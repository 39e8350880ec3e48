"""Phase I atomic extraction: a window of gated turns -> context-independent entries.

* :mod:`.rules` - the :class:`Extractor` protocol, :class:`ExtractionContext` and the
  default, LLM-free :class:`RuleExtractor`;
* :mod:`.grounding` - pronouns, places, topics, self-stated attributes, sentence split;
* :mod:`.dates` - relative time grounded to absolute dates;
* :mod:`.segment` - markdown-aware units of long messages (lists, tables, code, prose);
* :mod:`.llm` - :class:`~ariadnemem_core.extraction.llm.LLMExtractor` (one LLM call per
  window, with retry, rule fallback and coverage patching). Not imported here, so that
  the rule path never loads the LLM client.
"""

from .rules import (
    ExtractionContext,
    Extractor,
    RuleExtractor,
    embedding_text,
    is_block,
    other_party_for,
    question_context,
)

__all__ = ["ExtractionContext", "Extractor", "RuleExtractor", "embedding_text", "is_block", "other_party_for",
           "question_context"]
