"""The soak tier: `make soak` (`pytest --soak`) runs only the tests marked `soak`, at their long lengths.

`make test` proves every claim once; a test marked `soak` has a longer version that tries the same claim
again and again (the crash harnesses' kill plans, the whole demand scenario). A test marked `soak_only`
too repeats a claim `make test` proves elsewhere (the same mechanism on another deployment): only
`make soak` runs it. The `soak` fixture tells a
test which run it is in. What a soak test records with `record_property(SOAK_PROPERTY, {figure: value})`
goes, with each test's outcome and time and the commit tested, into `docs/soak-report.md`, which the docs
site shows.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time

import pytest

from jobs.project import PROJECT_ROOT

SOAK_PROPERTY = "soak"
"""A soak test's `record_property(SOAK_PROPERTY, {figure: value})`: its table in the soak report."""
SOAK_REPORT = PROJECT_ROOT / "docs" / "soak-report.md"
_STARTED_AT = pytest.StashKey[float]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        default=False,
        help=f"the soak run: only tests marked `soak`, at their long lengths; writes {SOAK_REPORT.name}",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_STARTED_AT] = time.time()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = "soak" if config.getoption("--soak") else None
    kept = [
        item
        for item in items
        if (item.get_closest_marker("soak") if wanted else not item.get_closest_marker("soak_only"))
    ]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    # Once, in the process that reports (xdist's workers send it their reports and properties).
    if config.getoption("--soak") and not config.option.collectonly and not hasattr(config, "workerinput"):
        write_soak_report(terminalreporter, config.stash[_STARTED_AT])
        terminalreporter.write_sep("-", f"soak report written to {SOAK_REPORT.relative_to(PROJECT_ROOT)}")


@pytest.fixture(scope="session")
def soak(request: pytest.FixtureRequest) -> bool:
    """Whether this is the soak run, where tests marked `soak` take their long lengths."""
    return bool(request.config.getoption("--soak"))


def write_soak_report(terminalreporter: pytest.TerminalReporter, started_at: float) -> None:
    """Each soak test's outcome, time and recorded figures, with the commit tested."""
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=PROJECT_ROOT, capture_output=True, text=True
    ).stdout.strip()
    started = datetime.datetime.fromtimestamp(started_at, datetime.UTC)
    outcomes = {name: len(terminalreporter.stats.get(name, [])) for name in ("passed", "failed", "error")}
    lines = [
        "# Soak report",
        "",
        "Written by `make soak` (`pytest --soak`: the long versions of the tests marked `soak`; "
        "[Operations](operations.md#which-run-proves-what) says what each proves). Do not edit: the next "
        "soak run writes it again.",
        "",
        f"- commit `{commit or 'unknown'}`, started {started:%Y-%m-%d %H:%M} UTC, "
        f"{time.time() - started_at:.0f} s in all",
        f"- {outcomes['passed']} passed, {outcomes['failed']} failed, {outcomes['error']} errors",
    ]
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            if report.when != "call":
                continue
            lines += ["", f"## `{report.nodeid}`", "", f"{outcome}, in {report.duration:.0f} s"]
            for name, figures in report.user_properties:
                if name == SOAK_PROPERTY:
                    lines += ["", "| figure | value |", "|---|---|"]
                    lines += [f"| {figure} | {_shown(value)} |" for figure, value in figures.items()]
    SOAK_REPORT.write_text("\n".join(lines) + "\n")


def _shown(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
