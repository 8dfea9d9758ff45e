"""MkDocs hook: the packages of `jobs`, each with the first sentence of its docstring, rendered where a page
holds `<!-- jobs-packages -->`, so the layout page lists what the tree holds today."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MARKER = "<!-- jobs-packages -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, packages_table(REPO_ROOT / "jobs"))


def packages_table(root: Path) -> str:
    rows = ["| package | what it holds |", "|---|---|"]
    for init in sorted(root.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        first_sentence = " ".join(docstring.split()).split(". ")[0].rstrip(".")
        rows.append(f"| `jobs.{init.parent.name}` | {first_sentence} |")
    return "\n".join(rows)
