"""The deployment's Kafka cluster and producer defaults for Kafka sinks."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from resources.kafka import KafkaClientDefaults


class KafkaSinkResource(KafkaClientDefaults):
    """Defaults of every Kafka sink (the dagger file's sink keys win)."""

    producer_config: dict[str, str] = Field(
        default_factory=dict, description="Extra librdkafka producer settings."
    )

    def component_defaults(self) -> dict[str, Any]:
        return self._defaults("producer_config", self.producer_config)
