"""Where the project's own files are: the checkout, its example dagger and its build folder."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DAGGER = PROJECT_ROOT / "daggers" / "booking_filter.yaml"
"""The dagger `make run` runs (`dagger demo`)."""
BUILD_DIR = PROJECT_ROOT / "build"
