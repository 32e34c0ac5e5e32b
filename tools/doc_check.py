"""Check that the README stays short and sourced, and that the docs can be navigated (issue 42).

    python tools/doc_check.py           # print every problem; exit 1 if there is one
    python tools/doc_check.py --fix     # first rewrite each long doc's contents list from its headings

The README:

* has at most :data:`README_MAX_LINES` lines, and no paragraph of more than :data:`PARAGRAPH_MAX_WORDS` words (a
  paragraph is a run of non-blank lines outside code fences, generated blocks and tables; a list is one paragraph;
  words are whitespace-separated);
* has no number outside a generated block (``<!-- generated: ... -->``, rendered from a committed results file by
  ``benchmarks/doc_tables.py``). A *number* is a run of digits, with ``.`` or ``,`` between digit groups
  (``3``, ``0.388``, ``3,840``), that no letter, digit or underscore touches on either side and no ``.`` precedes.
  Exempt: whatever is in a code fence, an inline code span, an HTML comment or a link's target (commands, file
  names, versions written as code); digits glued to a word (``Qwen3``, ``H100``, ``fp32``, ``2B``); a version of three
  or more parts (``0.9.1``); the ``1.`` of an ordered list item. Everything else, times and counts included, is a
  result and must come from a generated block;
* links only to files that exist, and to headings they have.

``docs/``:

* every ``docs/*.md`` of more than :data:`LONG_DOC_LINES` lines opens, after its ``# title``, with a summary of
  :data:`SUMMARY_LINES` non-blank lines, then a ``**Contents**`` line and a list of links, one to every ``##``
  heading of the doc (each link's anchor is a heading's GitHub anchor);
* ``docs/README.md`` links every other doc in ``docs/``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

README_MAX_LINES = 120
PARAGRAPH_MAX_WORDS = 120
LONG_DOC_LINES = 200
SUMMARY_LINES = (5, 10)
CONTENTS = "**Contents**"

GENERATED = re.compile(r"<!-- generated: .*?<!-- end generated -->", re.DOTALL)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.DOTALL)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
URL = re.compile(r"https?://\S+")
LIST_MARKER = re.compile(r"^(\s*)\d+\.(?=\s)", re.MULTILINE)
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)")
VERSION = re.compile(r"\d+(?:\.\d+){2,}")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _blank(match: re.Match) -> str:
    """The match replaced by as many newlines as it held, so that line numbers stay right."""
    return "\n" * match.group(0).count("\n")


def _spaces(match: re.Match) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def without_code(text: str) -> str:
    """``text`` with its generated blocks and code fences blanked out (newlines kept)."""
    return FENCE.sub(_blank, GENERATED.sub(_blank, text))


def stray_numbers(text: str) -> list[tuple[int, str]]:
    """``(line, number)`` for every number of ``text`` outside generated blocks (the module's rule)."""
    prose = without_code(text)
    for pattern in (COMMENT, CODE_SPAN, LINK_TARGET, URL):
        prose = pattern.sub(_spaces, prose)
    prose = LIST_MARKER.sub(lambda m: m.group(1) + " " * (len(m.group(0)) - len(m.group(1))), prose)
    found = []
    for match in NUMBER.finditer(prose):
        if VERSION.fullmatch(match.group(0)):
            continue
        found.append((prose.count("\n", 0, match.start()) + 1, match.group(0)))
    return found


def paragraphs(text: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every paragraph outside code fences, generated blocks, tables and headings."""
    out, start, lines = [], 0, []
    for number, line in enumerate([*without_code(text).splitlines(), ""], start=1):
        if line.strip() and not line.startswith(("|", "#")):
            start = start or number
            lines.append(line)
        elif lines:
            out.append((start, "\n".join(lines)))
            start, lines = 0, []
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: lower case, punctuation dropped (``_`` and ``-`` kept), spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, str]]:
    """``(level, anchor)`` of every heading outside code fences, duplicates suffixed ``-1``, ``-2`` as GitHub does."""
    seen: dict[str, int] = {}
    out = []
    for line in without_code(text).splitlines():
        match = re.match(r"(#{1,6}) (.+)", line)
        if not match:
            continue
        anchor = slug(match.group(2))
        if anchor in seen:
            seen[anchor] += 1
            anchor = f"{anchor}-{seen[anchor]}"
        else:
            seen[anchor] = 0
        out.append((len(match.group(1)), anchor))
    return out


def link_problems(text: str, here: Path, name: str) -> list[str]:
    """Relative links of the markdown ``text`` (a file in the folder ``here``) to missing files or headings."""
    problems = []
    for target in LINK.findall(COMMENT.sub("", without_code(text))):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (here / path) if path else None
        if file is not None and not file.exists():
            problems.append(f"{name}: links {target}, which does not exist")
            continue
        if anchor and (file is None or file.suffix == ".md"):
            doc = text if file is None else file.read_text()
            if anchor not in {a for _, a in headings(doc)}:
                problems.append(f"{name}: links {target}, a heading its file does not have")
    return problems


def readme_problems(text: str, root: Path = ROOT) -> list[str]:
    """What in the README ``text`` breaks the module's rules."""
    problems = []
    lines = text.splitlines()
    if len(lines) > README_MAX_LINES:
        problems.append(f"README.md: {len(lines)} lines, more than {README_MAX_LINES}: move detail to docs/")
    for start, paragraph in paragraphs(text):
        words = len(paragraph.split())
        if words > PARAGRAPH_MAX_WORDS:
            problems.append(
                f"README.md:{start}: a paragraph of {words} words, more than {PARAGRAPH_MAX_WORDS}: split or move it"
            )
    for line, number in stray_numbers(text):
        problems.append(
            f"README.md:{line}: the number {number} is outside a generated block: put it in a results file and a "
            "generated block (benchmarks/doc_tables.py), in code if it is a command, name or version, or in docs/"
        )
    return problems + link_problems(text, root, "README.md")


def opening_problems(text: str, name: str) -> list[str]:
    """What the opening of the long doc ``text`` lacks: title, summary, contents linking every ``##`` heading."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        return [f"{name}: does not start with a '# ' title"]
    if CONTENTS not in lines:
        return [f"{name}: no {CONTENTS} line after its summary (docs over {LONG_DOC_LINES} lines need both)"]
    at = lines.index(CONTENTS)
    summary = [line for line in lines[1:at] if line.strip()]
    problems = []
    low, high = SUMMARY_LINES
    if not low <= len(summary) <= high or any(line.startswith(("#", "|", "```")) for line in summary):
        problems.append(
            f"{name}: the summary before {CONTENTS} is {len(summary)} non-blank lines of text; it must be {low}-{high} "
            "lines of prose (no heading, table or code)"
        )
    anchors = []
    for line in lines[at + 1 :]:
        if not line.strip() and not anchors:
            continue
        match = re.match(r"\s*[-*] \[.+?\]\(#([^)]+)\)", line)
        if not match:
            break
        anchors.append(match.group(1))
    found = headings(text)
    for level, anchor in found:
        if level == 2 and anchor not in anchors:
            problems.append(
                f"{name}: {CONTENTS} does not link its section #{anchor} (python tools/doc_check.py --fix adds it)"
            )
    for anchor in set(anchors) - {a for _, a in found}:
        problems.append(f"{name}: {CONTENTS} links #{anchor}, which is no heading of the doc")
    return problems


def docs_problems(docs: Path) -> list[str]:
    """What in the folder ``docs`` breaks the module's rules."""
    problems = []
    index = docs / "README.md"
    linked = set(LINK.findall(index.read_text())) if index.exists() else set()
    linked = {target.partition("#")[0] for target in linked}
    if not index.exists():
        problems.append(f"{docs.name}/README.md: missing (the index saying which doc answers which question)")
    for doc in sorted(docs.glob("*.md")):
        name = f"{docs.name}/{doc.name}"
        text = doc.read_text()
        if doc != index and index.exists() and doc.name not in linked:
            problems.append(f"{docs.name}/README.md: does not link {doc.name}")
        if doc != index and len(text.splitlines()) > LONG_DOC_LINES:
            problems += opening_problems(text, name)
        problems += link_problems(text, docs, name)
    return problems


def contents_list(text: str, levels: tuple[int, ...] = (2,)) -> list[str]:
    """The contents list of the doc ``text``: a link to every heading of ``levels``, nested by level."""
    lines = []
    for line in without_code(text).splitlines():
        match = re.match(r"(#{2,6}) (.+)", line)
        if match and len(match.group(1)) in levels:
            lines.append("  " * (len(match.group(1)) - 2) + f"- [{match.group(2).strip()}]")
    anchors = [a for level, a in headings(text) if level in levels]
    return [f"{line}(#{anchor})" for line, anchor in zip(lines, anchors, strict=True)]


def fix_contents(text: str) -> str:
    """``text`` with the list after its ``**Contents**`` line rewritten from its headings (``##``, and ``###``
    where the list had nested entries); a doc without that line is returned as is."""
    lines = text.split("\n")
    if CONTENTS not in lines:
        return text
    start = lines.index(CONTENTS) + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and re.match(r"\s*[-*] \[", lines[end]):
        end += 1
    nested = any(line.startswith(" ") for line in lines[start:end])
    return "\n".join(lines[:start] + contents_list(text, (2, 3) if nested else (2,)) + lines[end:])


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    fix = "--fix" in (sys.argv[1:] if argv is None else argv)
    if fix:
        for doc in sorted((root / "docs").glob("*.md")):
            text = doc.read_text()
            if len(text.splitlines()) > LONG_DOC_LINES and fix_contents(text) != text:
                doc.write_text(fix_contents(text))
                print(f"rewrote the contents of docs/{doc.name}")
    problems = readme_problems((root / "README.md").read_text(), root) + docs_problems(root / "docs")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
