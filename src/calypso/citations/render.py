"""Plain-text renderings of a grounded answer: numbered markers and an evidence list."""

from __future__ import annotations

from calypso.citations.grounded import GroundedAnswer


def render_numbered(answer: GroundedAnswer) -> str:
    """The plain answer with [n] display numbers where the model cited."""
    out, last = [], 0
    for marker in answer.markers:
        if not marker.valid_numbers:
            continue
        out.append(answer.text[last : marker.position])
        numbers = [answer.source(n).display_number for n in marker.valid_numbers]
        out.append(" " + "".join(f"[{n}]" for n in numbers))
        last = marker.position
    out.append(answer.text[last:])
    return "".join(out)


def render_evidence(answer: GroundedAnswer) -> str:
    lines = []
    for segment in answer.segments:
        for citation in segment.citations:
            source = answer.source(citation.retrieval_number)
            quote = citation.quote
            flag = "" if quote.supported else "  (weak support)"
            lines.append(
                f"[{source.display_number}] {source.passage.document.filename} (p. {quote.page_label}), "
                f"support {quote.support:.2f}{flag}"
            )
            lines.append(f'    "{" ".join(quote.text.split())}"')
    return "\n".join(lines) if lines else "(no citations)"
