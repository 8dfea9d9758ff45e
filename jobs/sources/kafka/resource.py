"""The deployment's Kafka cluster and consumer defaults for Kafka streams."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PositiveInt

from resources.kafka import KafkaClientDefaults


class KafkaStreamResource(KafkaClientDefaults):
    """Defaults of every Kafka stream (the dagger file's stream keys win)."""

    consumer_config: dict[str, str] = Field(
        default_factory=dict, description="Extra librdkafka consumer settings."
    )
    max_records_per_batch: PositiveInt | None = Field(
        default=None, description="Upper bound on records per micro-batch."
    )

    def component_defaults(self) -> dict[str, Any]:
        return self._defaults(
            "consumer_config", self.consumer_config, max_records_per_batch=self.max_records_per_batch
        )
