"""Objects alive when a worker task starts are frozen once per batch of imports, not on every task."""

from __future__ import annotations

import gc
import importlib
import sys

from jobs.python_workers import freeze_imported_objects


def test_objects_are_frozen_when_modules_were_imported_since_the_last_freeze():
    try:
        freeze_imported_objects()
        frozen = gc.get_freeze_count()
        assert frozen > 0

        freeze_imported_objects()
        assert gc.get_freeze_count() == frozen  # nothing imported since: nothing to do

        sys.modules.pop("colorsys", None)
        module = importlib.import_module("colorsys")
        freeze_imported_objects()
        assert gc.get_freeze_count() > frozen
        # Frozen objects are out of the generations a collection walks.
        assert all(tracked is not module.__dict__ for tracked in gc.get_objects())
    finally:
        gc.unfreeze()
