"""The Dagster code location: every dagger file in the daggers folder becomes an asset."""

from dagger_assets.definitions import defs

__all__ = ["defs"]
