"""The asset keys of a dagger's stages: `<dagger>/stream/<table>`, `<dagger>/preprocessed/<table>`,
`<dagger>/sql`, `<dagger>/postprocessed`, `<dagger>/sink/<n>_<kind>`."""

from dagster import AssetKey

from jobs.model.spec import DaggerSpec
from jobs.sources.config import StreamConfig


def asset_prefix(spec: DaggerSpec) -> str:
    return spec.name.replace("-", "_")


def stream_key(spec: DaggerSpec, stream: StreamConfig) -> AssetKey:
    return AssetKey([asset_prefix(spec), "stream", stream.table])


def sql_key(spec: DaggerSpec) -> AssetKey:
    return AssetKey([asset_prefix(spec), "sql"])


def preprocessed_key(spec: DaggerSpec, stream: StreamConfig) -> AssetKey:
    return AssetKey([asset_prefix(spec), "preprocessed", stream.table])


def postprocessed_key(spec: DaggerSpec) -> AssetKey:
    return AssetKey([asset_prefix(spec), "postprocessed"])


def sink_key(spec: DaggerSpec, index: int) -> AssetKey:
    return AssetKey([asset_prefix(spec), "sink", f"{index}_{spec.sinks[index].kind}"])
