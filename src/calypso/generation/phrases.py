"""The extractive answerer's fixed sentences, in the language of the question.

The answerer writes only three sentences of its own: that nothing in the knowledge base answers, that
no knowledge base was searched, and, before quotes in another language than the question's, in which
language the sources say it ("The sources say this in Chinese.": it quotes, it does not translate). A Chinese question gets them in Chinese: the language is
``calypso.text.languages.detect`` of the question, and a question too short to tell (a name, a
number) takes the language of the retrieved passages, as the sentence choice does. Languages
without a translation here get English. The setting named in the second sentence stays as it is
spelled (``CALYPSO_LLM_BASE_URL``).
"""

from __future__ import annotations

from calypso.text import languages

NOT_FOUND: dict[str, str] = {
    "en": "I could not find anything about this in the knowledge base.",
    "zh": "我在知识库中没有找到与此相关的内容。",
    "ja": "ナレッジベースには、これに関する情報が見つかりませんでした。",
    "ko": "지식 베이스에서 이에 관한 내용을 찾지 못했습니다.",
    "de": "Dazu habe ich in der Wissensdatenbank nichts gefunden.",
    "fr": "Je n'ai rien trouvé à ce sujet dans la base de connaissances.",
    "es": "No he encontrado nada sobre esto en la base de conocimiento.",
    "it": "Non ho trovato nulla su questo nella base di conoscenza.",
    "pt": "Não encontrei nada sobre isto na base de conhecimento.",
    "nl": "Ik heb hierover niets gevonden in de kennisbank.",
}

NO_KNOWLEDGE_BASE: dict[str, str] = {
    "en": (
        "I can only answer by quoting a knowledge base, and none was searched for this question: "
        "this bot has no knowledge base. Give it a namespace, or configure a language model "
        "(CALYPSO_LLM_BASE_URL) to answer without one."
    ),
    "zh": (
        "我只能通过引用知识库来回答，而这个问题没有检索任何知识库：这个机器人没有知识库。"
        "请为它指定一个命名空间，或配置一个语言模型（CALYPSO_LLM_BASE_URL）以便在没有知识库时回答。"
    ),
    "ja": (
        "私はナレッジベースを引用して答えることしかできませんが、この質問ではナレッジベースが検索されませんでした。"
        "このボットにはナレッジベースがありません。名前空間を指定するか、言語モデル（CALYPSO_LLM_BASE_URL）を設定してください。"
    ),
    "ko": (
        "저는 지식 베이스를 인용해서만 답할 수 있는데, 이 질문에는 검색된 지식 베이스가 없습니다. 이 봇에는 지식 베이스가 "
        "없습니다. 네임스페이스를 지정하거나 언어 모델(CALYPSO_LLM_BASE_URL)을 설정하세요."
    ),
    "de": (
        "Ich kann nur antworten, indem ich eine Wissensdatenbank zitiere, und für diese Frage wurde keine "
        "durchsucht: Dieser Bot hat keine Wissensdatenbank. Geben Sie ihm einen Namespace oder konfigurieren Sie "
        "ein Sprachmodell (CALYPSO_LLM_BASE_URL), um ohne eine zu antworten."
    ),
    "fr": (
        "Je ne peux répondre qu'en citant une base de connaissances, et aucune n'a été consultée pour cette "
        "question : ce bot n'a pas de base de connaissances. Donnez-lui un espace de noms, ou configurez un "
        "modèle de langage (CALYPSO_LLM_BASE_URL) pour répondre sans base."
    ),
    "es": (
        "Solo puedo responder citando una base de conocimiento, y no se consultó ninguna para esta pregunta: "
        "este bot no tiene base de conocimiento. Asígnale un espacio de nombres o configura un modelo de "
        "lenguaje (CALYPSO_LLM_BASE_URL) para responder sin ella."
    ),
}


# "The sources say this in {language}.", by the question's language; {language} is named in that language too.
_QUOTED_IN: dict[str, str] = {
    "en": "The sources say this in {}.",
    "zh": "以下资料原文为{}。",
    "ja": "以下の資料は{}で書かれています。",
    "ko": "다음 자료는 {}로 되어 있습니다.",
    "de": "Die Quellen sagen dies auf {}.",
    "fr": "Les sources le disent en {}.",
    "es": "Las fuentes lo dicen en {}.",
    "it": "Le fonti lo dicono in {}.",
    "pt": "As fontes dizem isto em {}.",
    "nl": "De bronnen zeggen dit in het {}.",
}
# The languages' names (en zh ja ko de fr es it pt nl), in each of them.
_ORDER = ("en", "zh", "ja", "ko", "de", "fr", "es", "it", "pt", "nl")
_NAMES: dict[str, tuple[str, ...]] = {
    "en": ("English", "Chinese", "Japanese", "Korean", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch"),
    "zh": ("英文", "中文", "日文", "韩文", "德文", "法文", "西班牙文", "意大利文", "葡萄牙文", "荷兰文"),
    "ja": (
        "英語",
        "中国語",
        "日本語",
        "韓国語",
        "ドイツ語",
        "フランス語",
        "スペイン語",
        "イタリア語",
        "ポルトガル語",
        "オランダ語",
    ),
    "ko": (
        "영어",
        "중국어",
        "일본어",
        "한국어",
        "독일어",
        "프랑스어",
        "스페인어",
        "이탈리아어",
        "포르투갈어",
        "네덜란드어",
    ),
    "de": (
        "Englisch",
        "Chinesisch",
        "Japanisch",
        "Koreanisch",
        "Deutsch",
        "Französisch",
        "Spanisch",
        "Italienisch",
        "Portugiesisch",
        "Niederländisch",
    ),
    "fr": (
        "anglais",
        "chinois",
        "japonais",
        "coréen",
        "allemand",
        "français",
        "espagnol",
        "italien",
        "portugais",
        "néerlandais",
    ),
    "es": (
        "inglés",
        "chino",
        "japonés",
        "coreano",
        "alemán",
        "francés",
        "español",
        "italiano",
        "portugués",
        "neerlandés",
    ),
    "it": (
        "inglese",
        "cinese",
        "giapponese",
        "coreano",
        "tedesco",
        "francese",
        "spagnolo",
        "italiano",
        "portoghese",
        "olandese",
    ),
    "pt": (
        "inglês",
        "chinês",
        "japonês",
        "coreano",
        "alemão",
        "francês",
        "espanhol",
        "italiano",
        "português",
        "neerlandês",
    ),
    "nl": (
        "Engels",
        "Chinees",
        "Japans",
        "Koreaans",
        "Duits",
        "Frans",
        "Spaans",
        "Italiaans",
        "Portugees",
        "Nederlands",
    ),
}
QUOTED_IN: dict[tuple[str, str], str] = {
    (asked, said): template.format(_NAMES[asked][_ORDER.index(said)])
    for asked, template in _QUOTED_IN.items()
    for said in _ORDER
    if said != asked
}


def quoted_in(question_language: str, source_language: str) -> str | None:
    """That the quotes below are in ``source_language``, said in ``question_language``; None when they are
    the same language, or either has no sentence here (the quotes then speak for themselves)."""
    return QUOTED_IN.get((question_language, source_language))


def question_language(question: str, fallback: str = "en") -> str:
    """The language a question is written in; ``fallback`` when it is too short to tell."""
    return languages.detect(question, fallback)


def not_found(language: str) -> str:
    """That nothing in the knowledge base answers this, in ``language`` (English when not translated)."""
    return NOT_FOUND.get(language, NOT_FOUND["en"])


def no_knowledge_base(language: str) -> str:
    """That no knowledge base was searched, in ``language`` (English when not translated)."""
    return NO_KNOWLEDGE_BASE.get(language, NO_KNOWLEDGE_BASE["en"])
