"""Scanned Chinese and Japanese PDFs with their ground truth."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pypdfium2 as pdfium
from PIL import Image, ImageDraw, ImageFont

from bench.common import beir as be
from bench.common.scans import add_image_page, scan_page

FONTS = Path("/usr/share/fonts/opentype/noto")


# Index of each face in NotoSerifCJK-Regular.ttc (fc-list: JP, KR, SC, TC, HK order differs by build: checked).
FACES = {"zh": "Noto Serif CJK SC", "ja": "Noto Serif CJK JP"}


DPI = 150


PAGE = (1240, 1754)  # A4 at 150 dpi


MARGIN = 120


SIZE = 25  # 12 pt at 150 dpi


LEADING = 44


JAPANESE = [
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー"
    "泣いていた事だけは記憶している。吾輩はここで始めて人間というものを見た。しかもあとで聞くとそれは書生という"
    "人間中で一番獰悪な種族であったそうだ。この書生というのは時々我々を捕えて煮て食うという話である。しかしその"
    "当時は何という考もなかったから別段恐しいとも思わなかった。ただ彼の掌に載せられてスーと持ち上げられた時何だ"
    "かフワフワした感じがあったばかりである。",
    "ある日の暮方の事である。一人の下人が、羅生門の下で雨やみを待っていた。広い門の下には、この男のほかに誰も"
    "いない。ただ、所々丹塗の剥げた、大きな円柱に、蟋蟀が一匹とまっている。羅生門が、朱雀大路にある以上は、この"
    "男のほかにも、雨やみをする市女笠や揉烏帽子が、もう二三人はありそうなものである。それが、この男のほかには誰"
    "もいない。何故かと云うと、この二三年、京都には、地震とか辻風とか火事とか饑饉とか云う災がつづいて起った。",
    "ある日の事でございます。御釈迦様は極楽の蓮池のふちを、独りでぶらぶら御歩きになっていらっしゃいました。池の"
    "中に咲いている蓮の花は、みんな玉のようにまっ白で、そのまん中にある金色の蕊からは、何とも云えない好い匂が、"
    "絶間なくあたりへ溢れて居ります。極楽は丁度朝なのでございましょう。やがて御釈迦様はその池のふちに御佇みに"
    "なって、水の面を蔽っている蓮の葉の間から、ふと下の容子を御覧になりました。",
]


@dataclass
class ScanPage:
    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _font(language: str) -> ImageFont.FreeTypeFont:
    path = FONTS / "NotoSerifCJK-Regular.ttc"
    if not path.is_file():
        sys.exit(f"{path} not found: apt-get install fonts-noto-cjk")
    for index in range(10):
        font = ImageFont.truetype(str(path), SIZE, index=index)
        if font.getname()[0] == FACES[language]:
            return font
    sys.exit(f"{FACES[language]} is not in {path}")


def lay_out(paragraphs: list[tuple[str, str]], font: ImageFont.FreeTypeFont, pages: int) -> list[ScanPage]:
    """Whole paragraphs ``(id, text)`` wrapped to the text width, on at most ``pages`` pages."""
    width = PAGE[0] - 2 * MARGIN
    rows = (PAGE[1] - 2 * MARGIN) // LEADING
    laid: list[ScanPage] = [ScanPage()]
    for pid, text in paragraphs:
        lines: list[str] = []
        line = ""
        for char in text:
            if font.getlength(line + char) > width:
                lines.append(line)
                line = ""
            line += char
        lines.append(line)
        if len(laid[-1].lines) + len(lines) > rows:
            if len(laid) == pages or len(lines) > rows:
                break
            laid.append(ScanPage())
        laid[-1].lines.extend(lines)
        laid[-1].ids.append(pid)
        if len(laid[-1].lines) < rows:
            laid[-1].lines.append("")  # a blank line between paragraphs
    return [page for page in laid if page.lines]


def render(page: ScanPage, font: ImageFont.FreeTypeFont) -> Image.Image:
    image = Image.new("L", PAGE, 255)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(page.lines):
        draw.text((MARGIN, MARGIN + row * LEADING), line, font=font, fill=0)
    return image


def make_pdf(pages: list[ScanPage], font: ImageFont.FreeTypeFont, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    document = pdfium.PdfDocument.new()
    try:
        for page in pages:
            jpeg = scan_page(render(page, font), rng)
            add_image_page(document, jpeg, PAGE[0] * 72 / DPI, PAGE[1] * 72 / DPI)
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()
    finally:
        document.close()


def chinese_paragraphs(limit: int = 200) -> list[tuple[str, str]]:
    path = be.data_root() / "multilingual/cmrc2018-zh/corpus.jsonl"
    out = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            out.append((row["_id"], " ".join(row["text"].split())))
            if len(out) == limit:
                break
    return out


def make(language: str, out_dir: Path, pages: int, seed: int) -> tuple[Path, Path]:
    font = _font(language)
    paragraphs = chinese_paragraphs() if language == "zh" else [(f"ja-{i}", t) for i, t in enumerate(JAPANESE)]
    laid = lay_out(paragraphs, font, pages)
    pdf = out_dir / f"scanned_{language}.pdf"
    truth = out_dir / f"scanned_{language}.json"
    pdf.write_bytes(make_pdf(laid, font, seed))
    truth.write_text(
        json.dumps([{"text": p.text, "ids": p.ids} for p in laid], ensure_ascii=False, indent=1), encoding="utf-8"
    )
    return pdf, truth
