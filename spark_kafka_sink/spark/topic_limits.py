"""What a topic refuses for good, read once per task and topic with DescribeConfigs: its largest record batch
(``max.message.bytes``) and whether it is compacted (``cleanup.policy``: a compacted topic refuses null keys).

The dead-letter options (``onInvalidRecord``) use it to find such records before they are sent: a broker refusal
inside a transaction would leave the whole transaction abortable.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from spark_kafka_sink.errors import KafkaError, error_for_code
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.security import check_security, handshakes_for
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import DESCRIBE_CONFIGS, TOPIC_RESOURCE
from spark_kafka_sink.spark.options import SinkOptions

__all__ = ["TopicLimit", "TopicLimits", "TopicLimitSource"]

_KEYS = ["max.message.bytes", "cleanup.policy"]


@dataclass(frozen=True)
class TopicLimit:
    max_message_bytes: int  # the largest record batch the topic takes (record batch header included)
    compacted: bool  # cleanup.policy has compact: records need a key


class TopicLimitSource(Protocol):
    """Where a task learns its topics' limits (:class:`TopicLimits`; tests pass a fixed table)."""

    def of(self, topics: Iterable[str]) -> dict[str, TopicLimit]: ...


class TopicLimits:
    """A task's view of its topics' limits; asks the brokers once per topic. Used by the task's thread only."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options
        self._known: dict[str, TopicLimit] = {}  # owned by the task's thread

    def of(self, topics: Iterable[str]) -> dict[str, TopicLimit]:
        missing = sorted(set(topics) - set(self._known))
        if missing:
            self._known.update(self._describe(missing))
        return {topic: self._known[topic] for topic in topics}

    def _describe(self, topics: list[str]) -> dict[str, TopicLimit]:
        config = ProducerConfig.from_dict(self._options.producer_config())
        net_config = config.net_config()
        check_security(net_config)
        body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": _KEYS}
                              for topic in topics]}
        with NetworkClient(net_config, handshakes=handshakes_for) as client:
            answer = client.request(None, DESCRIBE_CONFIGS, body, config.max_block_ms, raise_on_error=False)
        out: dict[str, TopicLimit] = {}
        for result in answer.get("results", []):
            topic = result["resource_name"]
            code = int(result.get("error_code", NO_ERROR))
            if code != NO_ERROR:
                raise error_for_code(code)(
                    f"could not read the configuration of topic {topic!r}, which onInvalidRecord needs to find "
                    f"records the topic refuses: {result.get('error_message') or ''} (the principal needs "
                    "DescribeConfigs on the topic)", context=f"DescribeConfigs {topic}")
            values = {c["name"]: c["value"] for c in result.get("configs", [])}
            size, policy = values.get("max.message.bytes"), values.get("cleanup.policy") or ""
            out[topic] = TopicLimit(int(size) if size else 2**31 - 1,
                                    "compact" in [p.strip() for p in policy.split(",")])
        absent = set(topics) - set(out)
        if absent:
            raise KafkaError(f"DescribeConfigs did not answer for topics {sorted(absent)}")
        return out
