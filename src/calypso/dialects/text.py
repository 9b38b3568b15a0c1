"""Plain-text renderings of a grounded answer, for the CLI: numbered markers and an evidence list."""

from __future__ import annotations

from calypso.citations.grounded import GroundedAnswer, quote_locator
from calypso.dialects.content import numbered_text as render_numbered

__all__ = ["render_evidence", "render_numbered"]


def render_evidence(answer: GroundedAnswer) -> str:
    """Each cited source once, by display number, with the quotes that back the answer (their locator and
    support), then the sentences nothing supports: what backs the answer, line by line."""
    quotes: dict[int, list[str]] = {}
    for segment in answer.segments:
        for citation in segment.citations:
            source = answer.source(citation.retrieval_number)
            quote = citation.quote
            locator = quote_locator(quote, source.passage)[2]
            where = f" ({locator})" if locator else ""
            flag = "" if quote.supported else ", weak support"
            line = f'    "{" ".join(quote.text.split())}"{where}, support {quote.support:.2f}{flag}'
            shown = quotes.setdefault(source.display_number, [])
            if line not in shown:
                shown.append(line)
    lines = []
    by_number = {source.display_number: source for source in answer.sources}
    for number in sorted(quotes):
        lines.append(f"[{number}] {by_number[number].passage.document.filename}")
        lines += quotes[number]
    for sentence in answer.sentences:
        if sentence.status in ("unsupported", "weak"):
            text = " ".join(answer.text[sentence.start : sentence.end].split())
            lines.append(f'{"not supported" if sentence.status == "unsupported" else "weakly supported"}: "{text}"')
    return "\n".join(lines) if lines else "(no citations)"
