"""Daggers that feed daggers: the asset each stream reads from.

A stream that reads what another dagger's sink writes (the same Kafka topic, the same Parquet lake)
depends on that sink's asset, so the asset graph runs from one dagger into the next; one that reads an
event collection's topic depends on the collection's asset (`collections.py`). Whatever a stream
reads that no dagger of the deployment writes under that name becomes an external asset of group
`external_sources`, one per topic, topic pattern or path. Addresses are compared by name
(`kafka:<topic>`, `parquet:<path>`, from each kind's config), not by cluster: two clusters with a topic
of the same name are one source here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dagster import AssetKey, AssetSpec

from dagger_assets.collections import CollectionAsset
from dagger_assets.keys import sink_key
from jobs.model.config import without_credentials
from jobs.model.registry import STREAM_KINDS
from jobs.model.spec import DaggerSpec
from jobs.sources.config import StreamConfig

EXTERNAL_GROUP = "external_sources"


@dataclass(frozen=True)
class _Output:
    dagger: str
    address: str
    asset: AssetKey


def _public(address: str) -> tuple[str, str]:
    """The kind and name of an address, without the credentials a URL may carry."""
    kind, _, name = address.partition(":")
    return kind, without_credentials(name)


def external_key(address: str) -> AssetKey:
    kind, name = _public(address)
    return AssetKey([EXTERNAL_GROUP, kind, re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "_"])


class Lineage:
    """Which assets feed each stream of a set of daggers."""

    def __init__(self, specs: Sequence[DaggerSpec], collections: Sequence[CollectionAsset] = ()) -> None:
        self._outputs = [
            _Output(spec.name, address, sink_key(spec, index))
            for spec in specs
            for index, sink in enumerate(spec.sinks)
            if (address := sink.output()) is not None
        ]
        self._outputs += [_Output("", collection.address, collection.spec.key) for collection in collections]
        self._external: dict[AssetKey, AssetSpec] = {}

    def upstream(self, spec: DaggerSpec, stream: StreamConfig) -> list[AssetKey]:
        """The sinks of other daggers that `stream` reads, and an external asset for each of its inputs
        that no sink writes under exactly that address (a topic pattern, or a folder around a lake, may
        read more than the daggers write). A dagger reading its own output is no edge: it would be a
        cycle."""
        writers = [out for out in self._outputs if out.dagger != spec.name and stream.reads(out.address)]
        written = {writer.address for writer in writers}
        external = [self._external_asset(address) for address in stream.inputs() if address not in written]
        return list(dict.fromkeys([*(writer.asset for writer in writers), *external]))

    def source_of(self, address: str, fallback: AssetKey | None = None) -> AssetKey:
        """The sink that writes exactly `address`, else `fallback`, else an external asset for it."""
        for output in self._outputs:
            if output.address == address:
                return output.asset
        return fallback or self._external_asset(address)

    def external_assets(self) -> list[AssetSpec]:
        return list(self._external.values())

    def _external_asset(self, address: str) -> AssetKey:
        key = external_key(address)
        if key not in self._external:
            kind, name = _public(address)
            self._external[key] = AssetSpec(
                key=key,
                group_name=EXTERNAL_GROUP,
                kinds=set(STREAM_KINDS[kind].asset_kinds) if kind in STREAM_KINDS else set(),
                description=f"`{name}`: read, but written by none of this deployment's daggers.",
                metadata={"address": f"{kind}:{name}"},
            )
        return key
