"""Plain-text renderings of a grounded answer, for the CLI: numbered markers and an evidence list."""

from __future__ import annotations

from calypso.citations.grounded import GroundedAnswer, quote_locator
from calypso.dialects.content import numbered_text as render_numbered

__all__ = ["render_evidence", "render_numbered"]


def render_evidence(answer: GroundedAnswer) -> str:
    """Each (segment, cited source) with its quote and support score: what backs the answer, line by line."""
    lines = []
    for segment in answer.segments:
        for citation in segment.citations:
            source = answer.source(citation.retrieval_number)
            quote = citation.quote
            flag = "" if quote.supported else "  (weak support)"
            locator = quote_locator(quote, source.passage)[2]
            where = f" ({locator})" if locator else ""
            lines.append(
                f"[{source.display_number}] {source.passage.document.filename}{where}, support {quote.support:.2f}{flag}"
            )
            lines.append(f'    "{" ".join(quote.text.split())}"')
    return "\n".join(lines) if lines else "(no citations)"
