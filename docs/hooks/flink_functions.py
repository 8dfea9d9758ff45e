"""MkDocs hook: the table of Flink's functions (jobs/raystack/flink_sql/functions.toml) rendered where a page
holds `<!-- flink-functions -->`, so the page shows what the translator does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

MARKER = "<!-- flink-functions -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from jobs.raystack.flink_sql.functions import markdown_table

    return markdown.replace(MARKER, markdown_table())
