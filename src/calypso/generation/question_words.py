"""What a question asks with, in several languages: words that never count as its content.

English question words are stop words of the sentence picker's analyzer (``QUESTION_WORDS``);
German, French and Spanish ones are mostly on their languages' stop lists already. CJK questions
are analysed into character bigrams, where the interrogative is a bigram like any other: "赵鹏的
职业是什么" holds "什么", and a passage sentence that happens to say "什么" would win on it, since
it is rare in answers. Those bigrams are dropped here: any with an interrogative or sentence-final
particle character in it, and a few fixed ones (多少 "how many", 如何 "how", 可以 "can", 是否 "whether").

``WANTS_NUMBER`` tells a question that asks for a number or a date ("how many", "wann", "多少",
"哪一年"), which favours sentences with digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import cache

# English, exactly as the picker has always read it (its weights were tuned on English).
_WANTS_NUMBER_EN = (
    r"\b(how (long|many|much|often|old|far|soon|high|tall|big|large)|when|what (time|year|date)|which (year|date))\b"
)
_WANTS_NUMBER_OTHER = (
    r"\b(?:wann|wie (?:viele?|lange|oft|alt|weit|hoch|groß|gross)|in welchem jahr|seit wann|bis wann"  # de
    r"|quand|combien|en quelle année|quelle année"  # fr
    r"|cuándo|cuánto|cuántos|cuántas|en qué año|qué año)\b"  # es
    r"|多少|几|幾|哪一年|哪年|何时|何時|什么时候|什麼時候|哪一天|何年|いつ|いくつ|いくら|何人|何年|몇|언제|얼마"  # zh ja ko
)
WANTS_NUMBER = re.compile(f"{_WANTS_NUMBER_EN}|{_WANTS_NUMBER_OTHER}", re.I)

# A CJK bigram with one of these in it is the question's form, not its content.
_QUESTION_CHARS = frozenset(
    "什么麼甚哪谁誰吗嗎呢呀吧啊怎"  # zh: what, which, who, question particles, how
    "か"  # ja: the question particle (also in "です か" pairs)
    "냐까"  # ko: endings of questions (…냐, …니까)
)
_QUESTION_BIGRAMS = frozenset(
    (
        # zh
        "多少 可以 能否 是否 一个 这个 那个 我们 你们 他们 如何 为何 為何 何时 何時 何处 何處 何地 几个 幾個 几年 幾年 是否 请问 請問 哪里 为什 為什"
        # ja
        " 何で 何を 何が 何の 何は 何と どこ どの どれ どう だれ いつ なぜ です ます でし まし した ませ"
        # ko
        " 무엇 누구 어디 언제 어떻 떻게 어떤 어느 왜 입니 니다 습니 합니 인가 인지 나요 는가"
    ).split()
)
# Question words and the verbs questions are built with, which their languages' stop lists lack
# ("wann", "wurde", "hieß", "quand", "cuándo"): a sentence that says "wurde" is no better an answer.
QUESTION_WORDS_BY_LANGUAGE: dict[str, tuple[str, ...]] = {
    "de": tuple(
        "wann wer wem wen wessen warum wieso weshalb weswegen wodurch womit wofür woher wohin wozu welch"
        " wurde wurden worden heißt hieß hießen heißen nennt nannte nennen lautet lauteten lautete gibt gab"
        " gaben bezeichnet genannt viele beim zuerst mehr".split()
    ),
    "fr": tuple(
        "quand qui quoi où quel quelle quels quelles combien pourquoi comment lequel laquelle lesquels"
        " appelle appelait appelé appelée nomme nommé".split()
    ),
    "es": tuple(
        "cuándo cuando quién quiénes qué dónde donde cuál cuáles cuánto cuántos cuánta cuántas cómo como"
        " llama llamaba llamado llamada sido".split()
    ),
}
_CJK_CHAR = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def is_question_term(term: str) -> bool:
    """Whether a CJK bigram (or unigram) of a question is its form rather than its content."""
    if not _CJK_CHAR.match(term):
        return False
    return term in _QUESTION_BIGRAMS or any(ch in _QUESTION_CHARS for ch in term)


@cache
def _question_stems(language: str, analyze: Callable[[str, str], list[str]]) -> frozenset[str]:
    words = QUESTION_WORDS_BY_LANGUAGE.get(language)
    return frozenset(analyze(" ".join(words), language)) if words else frozenset()


def drop_question_terms(
    terms: Iterable[str], language: str = "en", analyze: Callable[[str, str], list[str]] | None = None
) -> frozenset[str]:
    """``terms`` without the CJK question bigrams and, given the ``analyze(text, language)`` that made
    them, without the stems of ``language``'s question words (none for English: its are stop words)."""
    stems = _question_stems(language, analyze) if analyze is not None and language != "en" else frozenset()
    return frozenset(t for t in terms if not is_question_term(t) and t not in stems)
