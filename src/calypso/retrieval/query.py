"""Query analysis for keyword retrieval: the words of a question that should drive matching.

A question's function words ("what", "do", "how long", "I", "have") are content-free, but BM25
scores them like any other term: their idf is moderate in a small knowledge base, so a passage
that happens to say "what do" outranks the one about the question's subject. The index keeps
every term of a document (stored terms stay valid); only the *query* is reduced here, to its
content words, and only when at least one content word remains ("Who are they?" is searched
as written).

Measured on SciFact and the Alps questions: see docs/benchmarks/retrieval.md, "Query analysis (issue 12)".
"""

from __future__ import annotations

from collections.abc import Callable

from calypso.text.tokenize import tokenize, words_of

# Surface forms (lowercased) a question uses for its form rather than its subject: question words,
# auxiliaries, pronouns and a few vague quantifiers. Words that can carry the subject of a question
# ("before", "after", "above", "most", "only", "first") are deliberately absent.
QUERY_FUNCTION_WORDS: frozenset[str] = frozenset(
    """
    what which who whom whose when where why how whatever whichever
    do does did doing done have has had having am is are was were be been being
    can could would should shall will may might must ought
    i me my mine myself we us our ours ourselves you your yours yourself yourselves
    he him his himself she her hers herself it its itself they them their theirs themselves
    this that these those there here
    a an the and or but if of at by for with about to from in on into as so than
    some any much many please ask tell know explain describe
    """.split()
)

# "how long", "how many", "how old": the second word belongs to the question form.
_AFTER_HOW: frozenset[str] = frozenset(("long", "many", "much", "far", "often", "old", "big", "large", "soon"))


def content_words(query: str) -> list[str]:
    """The words of ``query`` that should drive keyword matching (lowercased, in order).

    Function words are dropped, and so is the word after "how" in "how long"/"how many"/….
    """
    words = words_of(query.lower())  # combining marks kept: "\\w+" would cut Hindi words into letters
    kept = []
    for i, word in enumerate(words):
        if word in QUERY_FUNCTION_WORDS:
            continue
        if word in _AFTER_HOW and i > 0 and words[i - 1] == "how":
            continue
        kept.append(word)
    return kept


def keyword_query(query: str, analyze: Callable[[str], list[str]] = tokenize) -> str:
    """``query`` as the keyword index should see it: its content words, or the query itself if none has a term.

    ``analyze`` is the index's analyzer (text -> terms): what remains must still give a term.
    """
    reduced = " ".join(content_words(query))
    return reduced if analyze(reduced) else query
