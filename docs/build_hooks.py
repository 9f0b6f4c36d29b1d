r"""MkDocs hooks (mkdocs.yml `hooks:`): math rendered at build time, and a fence check.

Math: pymdownx.arithmatex (generic mode) marks formulas as ``<span class="arithmatex">\(…\)
</span>`` and ``<div class="arithmatex">\[…\]</div>``; each becomes MathML by latex2mathml,
which browsers display without any script, so the site needs no CDN and shows formulas
offline. A formula that cannot be converted is a warning, so the strict build fails.

Fences: a fenced code block that Markdown did not recognise (inside a list item, a fence
must be indented to the item's text) renders as inline code starting with the fence's
language, ``<code>sh`` and a line break; that is a warning too, which `--strict` alone
would not give.
"""

from __future__ import annotations

import html
import logging
import re
from typing import Any

from latex2mathml.converter import convert

log = logging.getLogger("mkdocs.hooks.build_hooks")

_INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.S)
_DISPLAY = re.compile(r'<div class="arithmatex">\s*\\\[(.*?)\\\]\s*</div>', re.S)
_STRAY_FENCE = re.compile(r"<code>(?:sh|bash|python|console|toml|c|cpp|text)\n")


def _mathml(tex: str, display: str, where: str) -> str | None:
    try:
        return convert(html.unescape(tex).strip(), display=display)
    except Exception as exc:  # latex2mathml raises assorted errors on unknown syntax
        log.warning("%s: cannot render the formula %r as MathML: %s", where, tex, exc)
        return None


def on_page_content(content: str, page: Any, **_: Any) -> str:
    """Replace the page's formulas by MathML and check for unrecognised fences."""
    where = page.file.src_uri

    def inline(m: re.Match[str]) -> str:
        return _mathml(m[1], "inline", where) or m[0]

    def display(m: re.Match[str]) -> str:
        found = _mathml(m[1], "block", where)
        return f'<div class="arithmatex">{found}</div>' if found else m[0]

    content = _INLINE.sub(inline, _DISPLAY.sub(display, content))
    for m in _STRAY_FENCE.finditer(content):
        log.warning(
            "%s: a code fence rendered as inline code (%r…): inside a list, indent the fence "
            "to the item's text",
            where,
            content[m.start() : m.start() + 40],
        )
    return content
