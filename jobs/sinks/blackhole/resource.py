"""The deployment's defaults for blackhole sinks (it has none: there is nothing to configure)."""

from __future__ import annotations

from resources.components import ComponentDefaults


class BlackholeSinkResource(ComponentDefaults):
    """Blackhole sinks take no settings; the resource is there so every sink kind has one."""
