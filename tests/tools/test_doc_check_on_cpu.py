"""tools/doc_check.py: the README stays short with every number generated, and the docs can be navigated (issue 42).

The repository passes; each rule fails on a bad input made from the real files.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import doc_check

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_readme_and_the_docs_pass(capsys):
    assert doc_check.main([], ROOT) == 0, capsys.readouterr().out


def test_the_command_line_exits_1_naming_each_problem(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "README.md").write_text(README.replace("## Results", "## Results\n\nIt took 12 minutes."))
    script = tmp_path / "tools" / "doc_check.py"  # the script reads the repository it sits in
    script.parent.mkdir()
    shutil.copy(ROOT / "tools" / "doc_check.py", script)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 1 and "the number 12 is outside a generated block" in out.stdout


def test_which_tokens_are_numbers():
    text = "\n".join(
        [
            "verl 0.9.1 on Qwen3.5-2B, H100 and fp32; see [docs](docs/x2.md) or https://a.b/v1.2",
            "1. a list item, then `python run.py --seeds 8` and <!-- 42 -->",
            "it took 2 min 34 s over 3,840 env steps to 0.388.",
            "<!-- generated: a.json table -->",
            "| 0.5 | 7 |",
            "<!-- end generated -->",
            "```bash",
            "bash run.sh 16",
            "```",
            "under ±0.012 and 41 %, near 12-15",
        ]
    )
    assert doc_check.stray_numbers(text) == [
        (3, "2"),
        (3, "34"),
        (3, "3,840"),
        (3, "0.388"),
        (10, "0.012"),
        (10, "41"),
        (10, "12"),
        (10, "15"),
    ]


def test_a_number_typed_into_the_readme_fails_and_the_same_number_in_a_generated_block_does_not():
    typed = README.replace("## Results\n", "## Results\n\nProVer is 0.139 ahead.\n", 1)
    assert any("the number 0.139 is outside a generated block" in p for p in doc_check.readme_problems(typed, ROOT))
    assert not doc_check.stray_numbers(README)
    assert "0.139" in README  # the same number, in the generated table


def test_a_long_readme_and_a_long_paragraph_fail():
    longer = README + "\nmore\n" * 3
    assert any(p.startswith("README.md: 126 lines, more than 120") for p in doc_check.readme_problems(longer, ROOT))
    wordy = README.replace("## Layout", "word " * 121 + "\n\n## Layout", 1)
    (problem,) = [p for p in doc_check.readme_problems(wordy, ROOT) if "words" in p]
    assert "a paragraph of 121 words, more than 120" in problem
    assert max(len(p.split()) for _, p in doc_check.paragraphs(README)) <= doc_check.PARAGRAPH_MAX_WORDS


def test_a_readme_link_to_a_missing_file_or_heading_fails():
    broken = README + "\n[x](docs/nope.md) and [y](docs/method.md#no-such-section)\n"
    problems = doc_check.readme_problems(broken, ROOT)
    assert "README.md: links docs/nope.md, which does not exist" in problems
    assert "README.md: links docs/method.md#no-such-section, a heading its file does not have" in problems


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Learning in verl's real loop (`benchmarks/learning.py`)", "learning-in-verls-real-loop-benchmarkslearningpy"),
        ("K × coef (8 seeds; env steps to 80 % / success AUC)", "k--coef-8-seeds-env-steps-to-80---success-auc"),
        ("Pool (`envs/pools/ray_pool.py`)", "pool-envspoolsray_poolpy"),
        ("1. Data", "1-data"),
    ],
)
def test_anchors_are_githubs(heading, anchor):
    assert doc_check.slug(heading) == anchor


def doc(sections: list[str], summary_lines: int = 6, listed: list[str] | None = None) -> str:
    """A doc of more than 200 lines with the given ``##`` sections, its summary and contents list."""
    listed = sections if listed is None else listed
    lines = ["# A doc", "", *[f"Summary line {i}." for i in range(summary_lines)], "", "**Contents**", ""]
    lines += [f"- [{s}](#{doc_check.slug(s)})" for s in listed] + [""]
    for s in sections:
        lines += [f"## {s}", "", *["text"] * 100, "```", "## not a heading: in code", "```", ""]
    return "\n".join(lines)


def docs_dir(tmp_path: Path, docs: dict[str, str], index: str | None = None) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in docs.items():
        (folder / name).write_text(text)
    if index is not None:
        (folder / "README.md").write_text(index)
    return folder


def test_a_long_doc_with_summary_contents_and_an_index_passes(tmp_path):
    folder = docs_dir(tmp_path, {"a.md": doc(["One", "Two", "Three"])}, index="[a](a.md)\n")
    assert len((folder / "a.md").read_text().splitlines()) > doc_check.LONG_DOC_LINES
    assert doc_check.docs_problems(folder) == []


def test_a_long_doc_without_contents_or_summary_or_a_section_listed_fails(tmp_path):
    bare = doc(["One", "Two"]).replace("**Contents**", "")
    folder = docs_dir(
        tmp_path,
        {
            "bare.md": bare,
            "short.md": doc(["One", "Two"], summary_lines=2),
            "missing.md": doc(["One", "Two", "Three"], listed=["One", "Three", "Four"]),
        },
        index="[bare](bare.md) [short](short.md) [missing](missing.md)\n",
    )
    problems = doc_check.docs_problems(folder)
    assert "docs/bare.md: no **Contents** line after its summary (docs over 200 lines need both)" in problems
    assert any(p.startswith("docs/short.md: the summary before **Contents** is 2 non-blank lines") for p in problems)
    assert "docs/missing.md: **Contents** does not link its section #two (python tools/doc_check.py --fix adds it)" in (
        problems
    )
    assert "docs/missing.md: **Contents** links #four, which is no heading of the doc" in problems
    assert "docs/missing.md: links #four, a heading its file does not have" in problems  # as any broken link is
    assert len(problems) == 5


def test_an_index_that_misses_a_doc_or_no_index_fails(tmp_path):
    folder = docs_dir(tmp_path, {"a.md": "# A\n", "b.md": "# B\n"}, index="[a](a.md#a)\n")
    assert doc_check.docs_problems(folder) == ["docs/README.md: does not link b.md"]
    (folder / "README.md").unlink()
    assert doc_check.docs_problems(folder) == [
        "docs/README.md: missing (the index saying which doc answers which question)"
    ]


def test_fix_rewrites_a_contents_list_from_the_headings_keeping_its_nesting(tmp_path):
    stale = doc(["One", "Two", "Three"], listed=["One", "Four"])
    fixed = doc_check.fix_contents(stale)
    assert fixed == doc(["One", "Two", "Three"])
    nested = fixed.replace("## Two\n", "## Two\n\n### Two and a half\n").replace("- [Two]", "  - [Two]")
    assert "  - [Two and a half](#two-and-a-half)" in doc_check.fix_contents(nested).splitlines()
    assert doc_check.fix_contents("# A\n\nno contents\n") == "# A\n\nno contents\n"
    shutil.copytree(ROOT / "docs", tmp_path / "docs")  # the repository's docs, and one with a stale list
    (tmp_path / "docs" / "a.md").write_text(stale)
    (tmp_path / "docs" / "README.md").write_text((ROOT / "docs" / "README.md").read_text() + "[a](a.md)\n")
    (tmp_path / "README.md").write_text(README)
    assert doc_check.main([], tmp_path) == 1
    assert doc_check.main(["--fix"], tmp_path) == 0 and (tmp_path / "docs" / "a.md").read_text() == fixed
