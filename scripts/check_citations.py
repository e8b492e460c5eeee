#!/usr/bin/python3
"""Checks that every design-document citation in the repository resolves inside it.

    scripts/check_citations.py [ROOT]

Code, tests, CMake files, scripts and the README cite the design in docs/ as
`docs/SCHEDULES.md §2.3` (a numbered section, or item 3 of §2 where §2 numbers its items) or
`docs/STYLE.md, "Errors"` (a heading or a phrase of the document). This fails, naming file and
line, when a citation names a document that is not in docs/, a section or phrase that the
document does not have, when a design document is cited without its docs/ folder, or when a file
points outside the repository (the workspace's shared/ folder or an absolute /work path).
Run by CTest as `docs.citations`; exits 1 with the list of problems, 0 when there are none.
"""

import pathlib
import re
import subprocess
import sys

DOCS = ("ARCHITECTURE", "SCHEDULES", "SYNC_POLICIES", "TRACES", "STYLE")
CITATION = re.compile(r"docs/([A-Z_]+)\.md(?: (?:§|section )([0-9]+(?:\.[0-9]+)?)|,? \"([^\"]+)\")?")
BARE = re.compile(r"(?<![/\w\[])(" + "|".join(DOCS) + r")\.md")
OUTSIDE = re.compile(r"\.\./shared/|/work/shared|/work/main")
SUFFIXES = {".h", ".cc", ".cu", ".txt", ".cmake", ".in", ".sh", ".py", ".md", ".json", ".ipynb"}


def project_files(root):
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True).stdout.decode()
    for name in out.split("\0"):
        path = root / name
        if name and path.is_file() and (path.suffix in SUFFIXES or path.name == "run"):
            yield name, path


def sections(text):
    """Numbers of the headings ('## 2.', '### 2.3 ...') and, per heading number, its items."""
    numbers, items, current = set(), {}, None
    for line in text.splitlines():
        heading = re.match(r"#+\s+([0-9]+(?:\.[0-9]+)*)\.?\s", line)
        if heading:
            current = heading.group(1)
            numbers.add(current)
            continue
        item = re.match(r"\s*(?:\*\*)?([0-9]+)[.)]\s", line)
        if item and current is not None:
            items.setdefault(current, set()).add(item.group(1))
    return numbers, items


def resolves(doc_text, numbers, items, section, phrase):
    if section:
        if section in numbers:
            return True
        parent, _, item = section.rpartition(".")
        return bool(parent) and item in items.get(parent, set())
    if phrase:
        return phrase.lower() in doc_text.lower()
    return True


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    docs = {}
    for name in DOCS:
        path = root / "docs" / f"{name}.md"
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            docs[name] = (text, *sections(text))
    problems, checked = [], 0
    for name, path in project_files(root):
        if name == "scripts/check_citations.py":
            continue
        in_docs = name.startswith("docs/")
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            where = f"{name}:{number}"
            if OUTSIDE.search(line):
                problems.append(f"{where}: points outside the repository: {line.strip()}")
            if not in_docs and BARE.search(line):
                problems.append(f"{where}: cites a design document without docs/: {line.strip()}")
            for match in CITATION.finditer(line):
                checked += 1
                doc, section, phrase = match.groups()
                if doc not in docs:
                    if not (root / "docs" / f"{doc}.md").is_file():
                        problems.append(f"{where}: docs/{doc}.md is not in the repository")
                elif not resolves(docs[doc][0], docs[doc][1], docs[doc][2], section, phrase):
                    cited = f"§{section}" if section else f'"{phrase}"'
                    problems.append(f"{where}: docs/{doc}.md has no {cited}")
    for problem in problems:
        print(problem)
    print(f"{checked} citations checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
