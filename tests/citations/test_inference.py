"""Inferred attribution in the composer: which sentences get cited, and streaming = one-shot for every split."""

from __future__ import annotations

import random

import pytest

from calypso.citations.composer import AnswerComposer
from calypso.citations.events import MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.inference import Attributor
from calypso.citations.support import SUPPORT_THRESHOLD, best_evidence
from calypso.models import Chunk, Document, Passage
from calypso.text.sentences import sentence_spans, settled_end

PASSAGES = [
    "The Alps are the highest mountain range in Europe. They stretch about 1,200 km across eight countries.",
    "The Frankish expansion and the Bavarian expansion introduced feudalism and the building of castles. "
    "Monasteries spread at the same time.",
    "Glaciers cover parts of the range. Tourism is a major industry in the region today.",
]
FRANKISH = "The Frankish expansion and the Bavarian expansion introduced feudalism and the building of castles."
CAT = "My cat likes to sleep on warm sofas all day."
STRETCH = "The Alps stretch about 1,200 km across eight countries"
RAW = f"{FRANKISH} {CAT} {STRETCH} [Source 3]. Glaciers cover parts of the range."


def _sources() -> list[Source]:
    doc = Document("d", "file-d", "default", "general", "a.txt", "text/plain", 1, "h", 0, 1, 3)
    return [Source(i, Passage(doc, Chunk(i - 1, t, 0, len(t), 1, 1, ("1",)), 1.0)) for i, t in enumerate(PASSAGES, 1)]


def _find_quote(segment: str, source: Source) -> Quote:
    evidence = best_evidence(segment, source.passage.chunk.text)
    supported = evidence.score >= SUPPORT_THRESHOLD
    return Quote(
        evidence.text, evidence.start, evidence.end, 0, 0, source.retrieval_number, "1", evidence.score, supported
    )


def compose(deltas: list[str], mode: str = "fill") -> tuple[GroundedAnswer, list[TextEvent | MarkerEvent]]:
    sources = _sources()
    attributor = Attributor(sources, _find_quote, mode) if mode != "off" else None  # type: ignore[arg-type]
    composer = AnswerComposer(sources, _find_quote, attributor=attributor)
    events: list[TextEvent | MarkerEvent] = []
    for delta in deltas:
        events += composer.feed(delta)
    events += composer.flush()
    return composer.finish(attribution=mode), events


def _cited(answer: GroundedAnswer) -> list[tuple[str, list[tuple[int, str]]]]:
    return [(s.text, [(c.retrieval_number, c.attribution) for c in s.citations]) for s in answer.segments]


def test_fill_cites_supported_uncited_sentences_only() -> None:
    answer, _ = compose([RAW])
    assert _cited(answer) == [
        (FRANKISH, [(2, "inferred")]),
        # The model's [Source 3] does not support it and passage 1 does: the model named the wrong source,
        # so the sentence is cited to passage 1 and [Source 3] is reported as unsupported (issue 39).
        (STRETCH, [(1, "inferred")]),
        ("Glaciers cover parts of the range.", [(3, "inferred")]),
    ]
    assert [(u.retrieval_number, u.marker, u.text) for u in answer.unsupported] == [(3, "[Source 3]", STRETCH)]
    assert answer.attribution_counts() == {"model": 0, "inferred": 3}
    # Display numbers follow first citation, inferred or not.
    assert [(s.retrieval_number, s.display_number) for s in answer.sources] == [(1, 2), (2, 1), (3, 3)]
    inferred = [m for m in answer.markers if m.inferred]
    assert [(m.position, m.raw, m.valid_numbers) for m in inferred] == [
        (len(FRANKISH), "", (2,)),
        (answer.text.index(STRETCH) + len(STRETCH), "", (1,)),
        (len(answer.text), "", (3,)),
    ]


def test_fill_keeps_a_weak_model_citation_when_no_passage_supports_the_sentence() -> None:
    answer, _ = compose([f"{CAT} [Source 3]."])
    assert _cited(answer) == [(CAT, [(3, "model")])]  # kept, and flagged weak by its sentence status
    assert answer.unsupported == []


def test_off_is_the_models_markers_only() -> None:
    answer, _ = compose([RAW], "off")
    assert _cited(answer) == [(STRETCH, [(3, "model")])]
    assert not any(m.inferred for m in answer.markers)


def test_verify_takes_out_a_weak_model_citation_and_fills_its_sentence() -> None:
    answer, _ = compose([RAW], "verify")
    assert _cited(answer) == [
        (FRANKISH, [(2, "inferred")]),
        (STRETCH, [(1, "inferred")]),  # passage 1 says it; the model's [Source 3] did not
        ("Glaciers cover parts of the range.", [(3, "inferred")]),
    ]
    (reported,) = answer.unsupported
    assert (reported.retrieval_number, reported.marker, reported.text) == (3, "[Source 3]", STRETCH)
    assert reported.support < SUPPORT_THRESHOLD
    model_marker = next(m for m in answer.markers if not m.inferred)
    assert model_marker.valid_numbers == () and model_marker.unsupported == (3,)
    replacement = answer.markers[answer.markers.index(model_marker) + 1]
    assert replacement.inferred and replacement.position == model_marker.position and replacement.leading_space == " "


def test_short_sentences_and_headings_are_never_inferred() -> None:
    answer, _ = compose(["## Alps\nGlaciers.\nYes. Glaciers cover parts of the range."])
    assert _cited(answer) == [("Glaciers cover parts of the range.", [(3, "inferred")])]


def _key(answer: GroundedAnswer) -> tuple:
    return (
        answer.text,
        _cited(answer),
        [(m.position, m.numbers, m.valid_numbers, m.inferred, m.unsupported) for m in answer.markers],
    )


@pytest.mark.parametrize("mode", ["fill", "verify"])
@pytest.mark.parametrize(
    "raw",
    [
        RAW,
        f"{FRANKISH}\n\n- {STRETCH}\n- {CAT}\nGlaciers cover parts of the range! Tourism is a major industry [9]. "
        "They stretch about 1,200 km across eight countries, e.g. Austria [1]",
        f'"{FRANKISH}" {CAT}...  Monasteries spread at the same time. ',
        # Markers as real models write them (issue 39): as nouns, by name, in parentheses, with a page.
        f"According to [Source 2], the Frankish expansion introduced feudalism. [Source 1] says the Alps stretch "
        f"about 1,200 km (Source 1). As Source 3 notes, tourism is a major industry [Source: a.txt, p. 1]. {CAT} "
        "Glaciers cover parts of the range.",
    ],
)
def test_streaming_equals_one_shot_for_every_split(raw: str, mode: str) -> None:
    whole, _ = compose([raw], mode)
    assert any(m.inferred for m in whole.markers)
    rng = random.Random(17)
    splits = [[raw[:cut], raw[cut:]] for cut in range(len(raw) + 1)]
    for _ in range(100):
        cuts = sorted(rng.sample(range(len(raw)), rng.randint(1, 40)))
        splits.append([raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)])])
    for deltas in splits:
        answer, events = compose(deltas, mode)
        assert _key(answer) == _key(whole)
        # Each citation event comes right after the text that ends its sentence, before any later text.
        shown = 0
        for event in events:
            if isinstance(event, TextEvent):
                shown += len(event.text)
            else:
                assert shown == event.placement.position
        assert shown == len(whole.text)


def test_text_is_held_only_from_an_open_sentence_end() -> None:
    sources = _sources()
    composer = AnswerComposer(sources, _find_quote, attributor=Attributor(sources, _find_quote))
    first = composer.feed("Glaciers cover parts of the range")
    assert "".join(e.text for e in first if isinstance(e, TextEvent)) == "Glaciers cover parts of the range"
    held = composer.feed(". Tou")
    assert held == []  # the full stop may or may not end the sentence: wait for the next word
    later = composer.feed("rism is a major industry in the region")
    assert isinstance(later[1], MarkerEvent) and later[1].placement.position == len(
        "Glaciers cover parts of the range."
    )


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith says refunds take 30 days, e.g. for shoes. In the U.S. The fee is 2.5%. Das gilt z. B. am 3. Oktober.",
        "1. Open the box.\n2. Read the manual\n\nDone. 東京は首都です。大阪も。 End.[83] Next one here... and more",
        "It began in the U.S. Army units. Then etc. The end. Short\nlines here\n- item one\n- item two",
    ],
)
def test_settled_end_never_moves_a_cut_before_it(text: str) -> None:
    final = sentence_spans(text)
    for end in range(len(text) + 1):
        settled = settled_end(text, 0, end)
        assert settled <= end
        spans = sentence_spans(text, 0, end)
        # A sentence followed by one that starts before the settled point is complete: the whole
        # text has exactly that sentence too, however the text goes on.
        complete = [spans[i] for i in range(len(spans) - 1) if spans[i + 1][0] <= settled]
        assert all(span in final for span in complete), (end, settled)
