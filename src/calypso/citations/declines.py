"""A model's own "the sources do not say": recognised, so nothing is cited for it and it claims nothing.

An upstream model told to answer from the passages says so when they do not answer ("The provided
documents do not mention cash refunds.", "资料中没有提到退款方式。"). Such a sentence is about the
sources, not a claim from them: inferred citations would attach the nearest passage to it (the one that
does *not* say it), and an answer made of declines would read as grounded. So ``is_decline`` keeps the
attributor away from it (``inference.Attributor``) and makes it "not a claim" (``claims``); with nothing
cited, the answer's state is seed 000's ``missing``.

The patterns name the sources as the subject ("the documents/context/passages … do not …") or the
writer failing to find ("I could not find …"), in the languages the answerer declines in
(``generation.phrases``), so an ordinary negative claim ("Gift cards are not refundable.") is untouched.
"""

from __future__ import annotations

import re

_SOURCES_EN = (
    r"(?:sources?|documents?|context|passages?|excerpts?|knowledge base|provided (?:text|information|material)s?|"
    r"retrieved (?:text|information)|search results?|files?|materials?)"
)
_PATTERNS = [
    # English: the sources as the subject of a negation, or what they lack.
    rf"\b(?:the|these|those|your|my|provided|given|available|retrieved)\b[^.!?]{{0,30}}\b{_SOURCES_EN}\b[^.!?]{{0,40}}"
    r"\b(?:do(?:es)?\s*n[o']?t|did\s*n[o']?t|don[’']t|doesn[’']t|contains?\s+no|ha(?:s|ve)\s+no|makes?\s+no|"
    r"say(?:s)?\s+nothing|offers?\s+no|provides?\s+no|gives?\s+no|lacks?|are\s+silent|is\s+silent)\b",
    rf"\b(?:not|never)\s+(?:mentioned|stated|specified|covered|addressed|included|provided|given|discussed|"
    rf"described|found|available)\s+(?:in|by|within)\s+(?:the|these|any of the)\b[^.!?]{{0,30}}\b{_SOURCES_EN}",
    r"\b(?:i|we)\s+(?:could\s*n[o']?t|can\s*n[o']?t|cannot|can[’']t|couldn[’']t|did\s*n[o']?t|didn[’']t|"
    r"was\s+unable\s+to|were\s+unable\s+to|am\s+unable\s+to|do\s+not|don[’']t)\s+(?:find|locate|see|determine|"
    r"tell|answer|know)\b",
    rf"\bnone\s+of\s+the\b[^.!?]{{0,20}}\b{_SOURCES_EN}\b[^.!?]{{0,30}}\b(?:address|mention|answer|say|state|"
    r"cover|contain|discuss|specify)",
    r"\bthere\s+(?:is|was|are)\s+no\s+(?:specific\s+|relevant\s+|further\s+|such\s+)?(?:information|mention|"
    r"details?|data|record)\b",
    r"\b(?:no|not\s+enough)\s+(?:relevant\s+)?information\s+(?:is\s+)?(?:available|provided|given)\b",
    # Chinese and Japanese: "not mentioned / not found / cannot determine", or the sources lacking it.
    r"(?:资料|文档|文件|来源|上下文|材料|段落|知识库|文本|内容)[^。！？]{0,12}(?:没有|未|并未|并没有|不)"
    r"(?:提到|提及|说明|涉及|包含|记载|给出|相关)",
    r"(?:没有|未|并未|并没有)(?:提到|提及)",
    r"(?:没有|未能|无法|不能)(?:找到|查到)",
    r"(?:无法|不能)(?:确定|回答|判断)",
    r"(?:没有|并无|无)(?:相关信息|相关内容|相关资料|具体信息)",
    r"(?:記載されていません|見つかりませんでした|情報はありません|言及されていません|わかりません)",
    # German.
    r"\b(?:keine|nicht\s+genügend)\s+(?:\w+\s+)?(?:Informationen|Angaben|Hinweise|Aussagen)\b",
    r"\b(?:Dokument|Quelle|Text|Kontext|Unterlage|Passage|Auszug|Auszüge|Wissensdatenbank|Material)\w*\b[^.!?]{0,40}"
    r"\bnicht\s+(?:erwähnt|genannt|angegeben|beschrieben|enthalten|aufgeführt)\b",
    r"\bnicht\s+(?:erwähnt|genannt)\b",
    r"\b(?:konnte|kann|habe)\b[^.!?]{0,40}\bnicht\s+(?:finden|gefunden|feststellen|beantworten)\b",
    r"\bgeht\b[^.!?]{0,40}\bnicht\s+hervor\b",
    # French, Spanish, Italian, Portuguese.
    r"\bne\s+(?:mentionnent|mentionne|précisent|précise|contiennent|contient|disent|dit|indiquent|indique)\s+pas\b",
    r"\b(?:aucune|pas\s+d['’])\s*information\b",
    r"\bje\s+n['’]ai\s+(?:rien|pas)\s+trouvé\b",
    r"\bno\s+(?:mencionan|menciona|contienen|contiene|especifican|especifica|dicen|dice|indican|indica)\b",
    r"\bno\s+(?:he|pude|puedo|encontré)\s+(?:encontrar|encontrado|nada)\b",
    r"\bno\s+hay\s+información\b",
    r"\bnon\s+(?:menzionano|menziona|contengono|contiene|specificano|specifica)\b",
    r"\bnão\s+(?:mencionam|menciona|contêm|contém|especificam|especifica)\b",
]
_DECLINE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)


def is_decline(sentence: str) -> bool:
    """Whether ``sentence`` says that the sources do not answer (or that the writer found nothing)."""
    return _DECLINE.search(sentence) is not None
