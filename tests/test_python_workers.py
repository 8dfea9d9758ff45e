"""Objects alive when a worker task starts are frozen once per batch of imports, not on every task."""

from __future__ import annotations

import gc
import sys
import types
import uuid

from jobs.engine.python_workers import freeze_imported_objects


def _collectable(obj: object) -> bool:
    """Whether a collection would walk `obj`: frozen objects are out of every generation."""
    return any(tracked is obj for tracked in gc.get_objects())


def test_objects_are_frozen_when_modules_were_imported_since_the_last_freeze():
    name = f"dagger_test_module_{uuid.uuid4().hex}"
    try:
        freeze_imported_objects()
        made_by_a_task = [[]]
        freeze_imported_objects()
        assert _collectable(made_by_a_task)  # nothing imported since: nothing frozen

        module = sys.modules[name] = types.ModuleType(name)  # what an import leaves behind
        freeze_imported_objects()
        assert not _collectable(module.__dict__)
        assert not _collectable(made_by_a_task)
    finally:
        sys.modules.pop(name, None)
        gc.unfreeze()
