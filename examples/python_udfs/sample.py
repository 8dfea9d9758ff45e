"""SAMPLE(text): the text followed by the contents of data/sample_data.txt (Dagger's sample function).

The data file is read once, when the module is imported on the driver; the function carries the text to
the executors, so the file need not exist there.
"""

from pathlib import Path

SAMPLE_DATA = (Path(__file__).parent / "data" / "sample_data.txt").read_text(encoding="utf-8")


def sample(text: str) -> str:
    return text + SAMPLE_DATA
