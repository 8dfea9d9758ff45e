"""MkDocs hook: tables generated from the code, each rendered where a page holds its marker, so the pages
show what the code does when the site is built.

- `<!-- flink-functions -->`: Flink's functions and what the translator does with each
  (jobs/raystack/flink_sql/functions.toml);
- `<!-- jobs-packages -->`: the packages of `jobs`, each with the first sentence of its docstring.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def flink_functions_table() -> str:
    from jobs.raystack.flink_sql.functions import markdown_table

    return markdown_table()


def packages_table(root: Path = REPO_ROOT / "jobs") -> str:
    rows = ["| package | what it holds |", "|---|---|"]
    for init in sorted(root.glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        first_sentence = " ".join(docstring.split()).split(". ")[0].rstrip(".")
        rows.append(f"| `jobs.{init.parent.name}` | {first_sentence} |")
    return "\n".join(rows)


TABLES: dict[str, Callable[[], str]] = {
    "<!-- flink-functions -->": flink_functions_table,
    "<!-- jobs-packages -->": packages_table,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, table in TABLES.items():
        if marker in markdown:
            markdown = markdown.replace(marker, table())
    return markdown
