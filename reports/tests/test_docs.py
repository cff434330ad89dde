"""The front page and docs stay true and short: every command runs (--help), every link resolves, and the size
limits the project set hold (README 200 lines, no paragraph over 8 lines, no table
cell over 200 characters, a device folder's README 80 lines and at most two runs)."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def prose(text: str) -> list[list[str]]:
    """Paragraphs and tables outside code blocks, as lists of lines."""
    blocks, cur, fenced = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            cur = []
            continue
        if fenced:
            continue
        if line.startswith(("#", "<!--")):  # a heading or a comment stands alone
            cur = []
            continue
        if line.strip():
            if not cur:
                blocks.append(cur)
            cur.append(line)
        else:
            cur = []
    return blocks


def test_readme_commands_run():
    binary = ROOT / "build" / "gpt2bench"
    if not binary.exists():
        pytest.skip("no build/gpt2bench")
    readme = (ROOT / "README.md").read_text()
    commands = sorted(set(re.findall(r"^build/gpt2bench( [a-z-]+)?", readme, re.M)))
    assert len(commands) >= 10, commands
    for cmd in commands:
        r = subprocess.run([str(binary)] + cmd.split() + ["--help"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (cmd, r.stdout[-300:], r.stderr[-300:])
    for target in re.findall(r"^make ([a-z-]+)", readme, re.M):
        assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M), target


def test_every_link_resolves():
    for page in PAGES + sorted((ROOT / "reports" / "reference").glob("*/README.md")):
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) + re.findall(r"`(docs/[\w.-]+\.md)`", text):
            if target.startswith("http"):
                continue
            base = ROOT if target.startswith("docs/") and page.parent.name == "docs" else page.parent
            assert (base / target).exists() or (ROOT / target).exists(), f"{page.name}: {target}"


def test_the_size_limits_hold():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in PAGES:
        text = page.read_text()
        if page.parent.name == "docs":  # each page opens with a summary of three lines at most
            lines = text.splitlines()
            summary = lines[2:lines.index("", 2)]
            assert lines[0].startswith("# ") and 1 <= len(summary) <= 3, f"{page.name}: {summary}"
        for block in prose(text):
            if block[0].startswith("|"):
                for row in block:
                    cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
                    assert all(len(c.strip()) <= 200 for c in cells), f"{page.name}: {row[:80]}"
            else:  # a paragraph, or each item of a list
                items = [[]]
                for line in block:
                    if re.match(r"(- |\d+\. )", line):
                        items.append([])
                    items[-1].append(line)
                for item in filter(None, items):
                    assert len(item) <= 8, f"{page.name}: a paragraph of {len(item)} lines: {item[0][:60]}"


def test_committed_runs_are_pruned():
    for folder in sorted(p for p in (ROOT / "reports" / "reference").iterdir() if p.is_dir()):
        runs = [p for p in folder.iterdir() if (p / "rungs.json").exists()]
        assert len(runs) <= 2, folder.name
        assert len((folder / "README.md").read_text().splitlines()) <= 80, folder.name
