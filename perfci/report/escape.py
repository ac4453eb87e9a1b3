"""Make untrusted names (kernels, ranges, branches) safe inside GitHub-flavoured Markdown.

Kernel names come from the code under test, so a pull request controls them. GitHub renders
HTML in comments, so a name must not be able to inject tags, links, mentions or table cells:

1. control characters and newlines become spaces (a newline would end a table row);
2. Markdown punctuation that means something inline is backslash-escaped, ``|`` as ``\\|``
   (GFM splits cells before parsing inlines, so ``\\|`` is the one way to keep a pipe inside a
   cell); ``(`` and ``!`` need no escape because ``[`` always gets one, and block markers
   (``#``, ``-``, ``1.``) are escaped only at the start of the text;
3. ``<``, ``>``, ``&`` and quotes become HTML entities, which CommonMark renders as the
   characters but never as tags (so ``<script>`` stays text);
4. ``@`` is followed by a word joiner (U+2060), so ``@org/team`` in a name pings no one, and
   the ``:`` of ``scheme://`` and the ``.`` of ``www.`` are escaped, so no bare URL in a name
   becomes a link.

Step 2 comes before step 3 because an entity such as ``&#x27;`` holds ``#``, which step 2 would
otherwise break.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlsplit

__all__ = ["md_code", "md_escape", "md_link", "shorten", "visible"]

#: ASCII punctuation that Markdown (CommonMark + GFM) gives a meaning to. ``<>&"'`` are left to
#: :func:`html.escape`: a backslash before ``&`` would stop the entity from being decoded.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")
#: Block markers only count at the start of a line: headings, lists, quotes, rules, ``1.``.
_LINE_START = re.compile(r"^(\s*)([#+\-=]|\d+[.)])")
#: Bare URLs become links in GFM; an escaped ``:`` or ``.`` stops the autolinker from seeing them.
_AUTOLINK = re.compile(r"(?i)(?<=\w)(:)(?=//)|(?<=\bwww)(\.)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
#: Invisible format characters (Unicode category Cf) that reorder or hide text: the bidi
#: embeddings, overrides and isolates (U+202A–202E, U+2066–2069), marks (U+200E/F, U+061C),
#: zero-width characters and the BOM. A kernel name holding U+202E would read reversed.
_INVISIBLE = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)
WORD_JOINER = "\u2060"
ELLIPSIS = "…"


def visible(text: object) -> str:
    """``text`` with invisible format characters shown as ``U+XXXX`` and controls as spaces.

    Applied wherever a name from the code under test is shown (comments, reports, pages,
    terminals), so that no name can reverse, hide or disguise the text around it.
    """
    raw = _CONTROL.sub(" ", str(text))
    return _INVISIBLE.sub(lambda m: f"<U+{ord(m[0]):04X}>", raw)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, keeping its head and tail.

    Kernel names differ at both ends (``ampere_sgemm_128x64_tn`` vs ``…_nn``; template
    arguments at the end), so the middle is what goes.
    """
    if limit < 3:
        raise ValueError(f"shorten limit must be at least 3, got {limit}")
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return f"{text[:head]}{ELLIPSIS}{text[len(text) - tail :]}"


def md_escape(text: object, *, max_len: int | None = None, mid_line: bool = False) -> str:
    """``text`` as inert Markdown for inline text and table cells (see the module docstring).

    ``max_len`` shortens the raw text first (with :func:`shorten`), so that no escape sequence
    or entity is ever cut in half. ``mid_line`` text never starts a line (it follows other text
    in a sentence or a cell): a leading ``-`` or ``1.`` cannot become a list there, so it is
    left as it is (``10.8 k tokens/s``, not ``10\\.8``).
    """
    raw = _CONTROL.sub(" ", str(text))
    if max_len is not None:
        raw = shorten(raw, max_len)
    escaped = _MD_SPECIAL.sub(r"\\\1", raw)
    if not mid_line:
        escaped = _LINE_START.sub(_escape_marker, escaped)
    escaped = _AUTOLINK.sub(lambda m: "\\" + m[0], escaped)
    escaped = html.escape(escaped, quote=True)
    return escaped.replace("@", "@" + WORD_JOINER)


def _escape_marker(match: re.Match[str]) -> str:
    spaces, marker = match.groups()
    return f"{spaces}{marker[:-1]}\\{marker[-1]}"


def md_code(text: object, *, max_len: int | None = None) -> str:
    """``text`` as an inline code span that is safe in a table cell.

    The fence is one backtick longer than the longest run inside; pipes are ``\\|`` because
    GFM splits table cells before it sees code spans. Entities are not decoded inside code,
    so no HTML escaping is needed (nor wanted).
    """
    raw = _CONTROL.sub(" ", str(text))
    if max_len is not None:
        raw = shorten(raw, max_len)
    raw = raw.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", raw)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if raw.startswith("`") or raw.endswith("`") or not raw.strip() else ""
    return f"{fence}{pad}{raw}{pad}{fence}"


def safe_url(url: str | None) -> str | None:
    """``url`` when it is http(s), with characters that could end a Markdown link encoded."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return None
    return quote(url.strip(), safe=":/?#@!$&'*+,;=%-._~")


def md_link(text: str, url: str | None) -> str:
    """``[text](url)`` with ``text`` escaped; only the text when ``url`` is not http(s)."""
    target = safe_url(url)
    label = md_escape(text)
    return f"[{label}]({target})" if target else label
