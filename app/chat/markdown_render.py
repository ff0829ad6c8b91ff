"""Markdown to the HTML subset QTextBrowser shows: paragraphs, headings, lists, quotes, inline code, bold,
italics, links, and fenced code blocks highlighted by Pygments (inline styles) with action links under a
`wisp-code:<action>/<index>` address. An unclosed fence (a reply still streaming) renders as code so far."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

FENCE = re.compile(r"^\s*(`{3,})\s*([\w+#.\-]*)\s*$")  # a longer fence can hold ``` in its code
CODE_SCHEME = "wisp-code"
ACTION_LABELS = {"copy": "Copy", "save": "Save as…", "continue": "Continue this code"}


@dataclass(frozen=True)
class CodeBlock:
    language: str
    code: str


@dataclass(frozen=True)
class RenderStyle:
    pygments_style: str
    code_background: str
    inline_code_background: str
    muted: str
    link: str


def split_blocks(text: str) -> list[str | CodeBlock]:
    """Prose strings and CodeBlocks in order; empty ones are left out (a fence just opened shows nothing yet)."""
    parts: list[str | CodeBlock] = []
    prose: list[str] = []
    code: list[str] | None = None
    language, opening = "", ""
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if code is None and fence:
            parts.append("\n".join(prose))
            prose, code, opening, language = [], [], fence.group(1), fence.group(2)
        elif code is not None and fence and not fence.group(2) and len(fence.group(1)) >= len(opening):
            parts.append(CodeBlock(language, "\n".join(code)))
            code = None
        elif code is not None:
            code.append(line)
        else:
            prose.append(line)
    parts.append(CodeBlock(language, "\n".join(code)) if code is not None else "\n".join(prose))
    return [part for part in parts if (part.code if isinstance(part, CodeBlock) else part).strip()]


def fenced(code: str) -> str:
    """Code as one fenced block, whatever backticks it holds: the fence is longer than any run of them."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code}\n{fence}"


def code_blocks(text: str) -> list[CodeBlock]:
    return [part for part in split_blocks(text) if isinstance(part, CodeBlock)]


def render_markdown(text: str, style: RenderStyle, actions: tuple[str, ...] = ("copy", "save")) -> str:
    rendered, index = [], 0
    for part in split_blocks(text):
        if isinstance(part, CodeBlock):
            rendered.append(render_code(part, index, style, actions))
            index += 1
        else:
            rendered.append(render_prose(part, style))
    return "".join(rendered)


def render_code(block: CodeBlock, index: int, style: RenderStyle, actions: tuple[str, ...]) -> str:
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style=style.pygments_style)
    body = highlight(block.code, lexer_for(block.language), formatter).rstrip("\n")
    links = " &nbsp; ".join(f'<a href="{CODE_SCHEME}:{action}/{index}" style="color:{style.link}">'
                            f"{ACTION_LABELS[action]}</a>" for action in actions)
    label = html.escape(block.language or "code")
    return (f'<table width="100%" cellspacing="0" cellpadding="6" bgcolor="{style.code_background}">'
            f'<tr><td><span style="color:{style.muted}">{label}</span> &nbsp; {links}</td></tr>'
            f'<tr><td><pre style="margin:0; white-space:pre-wrap">{body}</pre></td></tr></table>')


def lexer_for(language: str):
    try:
        return get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        return TextLexer()


HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
NUMBERED = re.compile(r"^\s*\d+[.)]\s+(.*)$")


def render_prose(text: str, style: RenderStyle) -> str:
    out, items, list_tag, paragraph = [], [], "", []

    def close_paragraph():
        if paragraph:
            out.append("<p>" + "<br>".join(indented(line, style) for line in paragraph) + "</p>")
            paragraph.clear()

    def close_list():
        nonlocal list_tag
        if items:
            out.append(f"<{list_tag}>" + "".join(f"<li>{item}</li>" for item in items) + f"</{list_tag}>")
            items.clear()
        list_tag = ""

    for line in text.split("\n"):
        heading, bullet, numbered = HEADING.match(line), BULLET.match(line), NUMBERED.match(line)
        if bullet or numbered:
            close_paragraph()
            tag = "ul" if bullet else "ol"
            if list_tag and tag != list_tag:
                close_list()
            list_tag = tag
            items.append(inline((bullet or numbered).group(1), style))
            continue
        close_list()
        if heading:
            close_paragraph()
            level = min(len(heading.group(1)) + 2, 6)  # chat headings should not shout
            out.append(f"<h{level}>{inline(heading.group(2), style)}</h{level}>")
        elif line.startswith(">"):
            close_paragraph()
            out.append(f'<blockquote style="color:{style.muted}">{inline(line.lstrip("> "), style)}</blockquote>')
        elif not line.strip():
            close_paragraph()
        else:
            paragraph.append(line)
    close_paragraph()
    close_list()
    return "".join(out)


INLINE_CODE = re.compile(r"`([^`]+)`")
BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])")
LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def indented(line: str, style: RenderStyle) -> str:
    """A prose line with its leading indentation kept (code pasted or written outside a fence; HTML would
    collapse it), a tab as four spaces."""
    rest = line.lstrip(" \t")
    width = len(line[:len(line) - len(rest)].replace("\t", "    "))
    return "&nbsp;" * width + inline(rest, style)


def inline(text: str, style: RenderStyle) -> str:
    """Escape, then mark up; inline code is cut out first so nothing inside it is reformatted."""
    pieces = INLINE_CODE.split(text)
    out = []
    for position, piece in enumerate(pieces):
        escaped = html.escape(piece, quote=False)
        if position % 2:
            out.append(f'<code style="background-color:{style.inline_code_background}">{escaped}</code>')
            continue
        escaped = BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", escaped)
        escaped = ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", escaped)
        escaped = LINK.sub(lambda m: f'<a href="{m.group(2)}" style="color:{style.link}">{m.group(1)}</a>', escaped)
        out.append(escaped)
    return "".join(out)
