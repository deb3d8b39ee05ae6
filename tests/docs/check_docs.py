#!/usr/bin/env python3
"""Keeps the user docs honest: every relative link and anchor resolves, the reference's
entries fit on a screen, README stays a front door, and no measurement or date sits in the
reference or the guides (they belong in docs/benchmarks.md and docs/records/).

Keys against entries: tests/e2e/cases/config.sh (docs_job_spec_in_sync); the experimental
values: tests/unit/config/test_experimental.cpp; the guides' commands: doc_commands.py.
"""
import os
import re
import sys
import unicodedata

MAX_REFERENCE_CELL = 400  # characters of a reference entry's meaning cell
MAX_README_LINES = 250
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")


def strip_code(text):
    """The text without fenced blocks and inline code (links there are examples)."""
    text = re.sub(r"^\s*```.*?^\s*```\s*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            out.append("-" if ch == " " else ch)
    return "".join(out)


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        in_fence = False
        for line in open(path, encoding="utf-8"):
            if re.match(r"^\s*```", line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for a in re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line):
                found.add(a)
        cache[path] = found
    return cache[path]


def user_docs(root):
    files = [os.path.join(root, "README.md")]
    for d, _, names in os.walk(os.path.join(root, "docs")):
        files += [os.path.join(d, n) for n in sorted(names) if n.endswith(".md")]
    return files


def check_links(root, problems):
    for path in user_docs(root):
        rel = os.path.relpath(path, root)
        text = strip_code(open(path, encoding="utf-8").read())
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{rel}: link to {target}: no such file")
                continue
            if anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}: link to {target}: {os.path.relpath(dest, root)} has no heading #{anchor}")


def check_reference(root, problems):
    path = os.path.join(root, "docs", "job-spec.md")
    longest = (0, "")
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if DATE.search(line):
            problems.append(f"docs/job-spec.md:{n}: a date ({DATE.search(line).group(0)}); measurements and "
                            "dates go to docs/benchmarks.md or docs/records/")
        if not line.startswith("| `"):
            continue
        cells = line.rstrip("\n").split(" | ")
        meaning = " | ".join(cells[2:]).rstrip(" |")
        longest = max(longest, (len(meaning), cells[0].lstrip("| ")))
        if len(meaning) > MAX_REFERENCE_CELL:
            problems.append(f"docs/job-spec.md:{n}: {cells[0].lstrip('| ')}'s entry is {len(meaning)} characters "
                            f"(at most {MAX_REFERENCE_CELL}: say what it does, its values and default, and link on)")
    return longest


def check_guides(root, problems):
    readme = os.path.join(root, "README.md")
    lines = sum(1 for _ in open(readme, encoding="utf-8"))
    if lines > MAX_README_LINES:
        problems.append(f"README.md: {lines} lines (at most {MAX_README_LINES}: a front door; the rest goes to docs/guides/)")
    guides = os.path.join(root, "docs", "guides")
    if not os.path.isdir(guides):
        problems.append("docs/guides/: missing (the task guides README links)")
        return lines
    for name in sorted(os.listdir(guides)):
        for n, line in enumerate(open(os.path.join(guides, name), encoding="utf-8"), 1):
            if DATE.search(line):
                problems.append(f"docs/guides/{name}:{n}: a date; measurements go to docs/benchmarks.md")
    return lines


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    problems = []
    check_links(root, problems)
    longest = check_reference(root, problems)
    lines = check_guides(root, problems)
    print(f"{len(user_docs(root))} pages; README {lines} lines; the reference's longest entry {longest[0]} "
          f"characters ({longest[1]})")
    if problems:
        print(f"{len(problems)} problem(s):\n  " + "\n  ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
