"""Every Kafka broker error code, declared once as data (Kafka 4.x: -1 .. 133).

Each row: code, protocol NAME, policy flags, and a one-line "what to do" for a producer. The flags were taken from
the Java client's exception classes (retriable = subclass of ``RetriableException``, invalid metadata = subclass of
``InvalidMetadataException``; checked against kafka-clients 4.3.1 by reflection). ``FATAL`` is our producer policy:
the producer instance cannot go on (fenced, not authorized, misconfigured) and must be closed.

:mod:`spark_kafka_sink.errors` declares one exception class per row and looks its flags up here.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ErrorCode", "ERROR_CODES", "NO_ERROR", "RETRY", "META", "FATAL", "class_name_for"]

RETRY = 1  # sending the same request again may succeed
META = 2  # cached metadata is stale: refresh it before retrying (implies RETRY in Kafka's hierarchy)
FATAL = 4  # the producer cannot continue; close it


class ErrorCode(NamedTuple):
    """One broker error code and the policy attached to it."""

    code: int
    name: str
    retriable: bool
    invalid_metadata: bool
    fatal: bool
    description: str


# fmt: off
_ROWS: tuple[tuple[int, str, int, str], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", 0, "The broker failed unexpectedly; check the broker log."),
    (1, "OFFSET_OUT_OF_RANGE", 0, "The offset is outside the log; reset the position."),
    (2, "CORRUPT_MESSAGE", RETRY, "The broker found a corrupt batch (CRC/size); it is retried, report if it persists."),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", RETRY | META,
     "Topic or partition unknown here; refresh metadata, create the topic if missing."),
    (4, "INVALID_FETCH_SIZE", 0, "The fetch size is invalid; fix the request."),
    (5, "LEADER_NOT_AVAILABLE", RETRY | META, "A leader election is in progress; refresh metadata and retry."),
    (6, "NOT_LEADER_OR_FOLLOWER", RETRY | META,
     "This broker no longer leads the partition; refresh metadata and retry."),
    (7, "REQUEST_TIMED_OUT", RETRY, "The broker timed out (e.g. waiting for replicas); retry."),
    (8, "BROKER_NOT_AVAILABLE", 0, "The broker is not available; check the cluster."),
    (9, "REPLICA_NOT_AVAILABLE", RETRY | META, "A replica is not available; refresh metadata and retry."),
    (10, "MESSAGE_TOO_LARGE", 0,
     "A record exceeds the broker's max.message.bytes; lower batch.size/max.request.size or raise the topic limit."),
    (11, "STALE_CONTROLLER_EPOCH", 0, "The controller moved; an inter-broker condition, not a client problem."),
    (12, "OFFSET_METADATA_TOO_LARGE", 0, "The offset commit metadata string is too long; shorten it."),
    (13, "NETWORK_EXCEPTION", RETRY | META, "The broker disconnected before answering; refresh metadata and retry."),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", RETRY, "The coordinator is still loading its state; retry after a backoff."),
    (15, "COORDINATOR_NOT_AVAILABLE", RETRY, "No coordinator is available; find the coordinator again and retry."),
    (16, "NOT_COORDINATOR", RETRY, "This broker is not the coordinator; find the coordinator again and retry."),
    (17, "INVALID_TOPIC_EXCEPTION", 0, "The topic name is invalid or internal; fix the topic name."),
    (18, "RECORD_LIST_TOO_LARGE", 0, "A batch exceeds the broker's segment size; lower batch.size."),
    (19, "NOT_ENOUGH_REPLICAS", RETRY, "Fewer in-sync replicas than min.insync.replicas; nothing written, retry."),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", RETRY,
     "Written, but to fewer in-sync replicas than required; retry (idempotence dedupes)."),
    (21, "INVALID_REQUIRED_ACKS", 0, "acks must be 0, 1 or -1 (all); fix the acks setting."),
    (22, "ILLEGAL_GENERATION", 0, "The consumer group generation is stale; rejoin the group."),
    (23, "INCONSISTENT_GROUP_PROTOCOL", 0, "The member's group protocols do not match the group's."),
    (24, "INVALID_GROUP_ID", 0, "The group id is invalid; set a non-empty group id."),
    (25, "UNKNOWN_MEMBER_ID", 0, "The coordinator does not know this group member; rejoin the group."),
    (26, "INVALID_SESSION_TIMEOUT", 0, "The session timeout is outside the broker's allowed range."),
    (27, "REBALANCE_IN_PROGRESS", 0, "The group is rebalancing; rejoin."),
    (28, "INVALID_COMMIT_OFFSET_SIZE", 0, "The offset commit is too large."),
    (29, "TOPIC_AUTHORIZATION_FAILED", 0, "Not authorized for the topic; grant WRITE/DESCRIBE ACLs to this principal."),
    (30, "GROUP_AUTHORIZATION_FAILED", 0, "Not authorized for the group; grant READ on the group to this principal."),
    (31, "CLUSTER_AUTHORIZATION_FAILED", FATAL,
     "Not authorized for a cluster action (e.g. IDEMPOTENT_WRITE); grant the ACL or disable idempotence."),
    (32, "INVALID_TIMESTAMP", 0, "A record timestamp is outside the topic's allowed range; fix the timestamps."),
    (33, "UNSUPPORTED_SASL_MECHANISM", FATAL, "The broker does not enable this SASL mechanism; change sasl.mechanism."),
    (34, "ILLEGAL_SASL_STATE", FATAL,
     "SASL exchange out of order; a client bug or a listener/security.protocol mismatch."),
    (35, "UNSUPPORTED_VERSION", FATAL, "The broker rejected the API version; the broker is probably too old."),
    (36, "TOPIC_ALREADY_EXISTS", 0, "The topic already exists; use it or pick another name."),
    (37, "INVALID_PARTITIONS", 0, "The partition count is invalid (below 1 or not an increase)."),
    (38, "INVALID_REPLICATION_FACTOR", 0, "The replication factor is below 1 or above the broker count."),
    (39, "INVALID_REPLICA_ASSIGNMENT", 0, "The replica assignment is invalid."),
    (40, "INVALID_CONFIG", 0, "A topic or broker configuration value is invalid; fix it."),
    (41, "NOT_CONTROLLER", RETRY, "This broker is not the controller; retry against the current controller."),
    (42, "INVALID_REQUEST", 0,
     "The broker could not parse the request; a client bug or version mismatch, check the broker log."),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", FATAL,
     "The topic's message format is too old for this request; upgrade the topic format."),
    (44, "POLICY_VIOLATION", 0, "The request violates a broker-side policy; adjust the request."),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", 0,
     "The broker saw a sequence gap; bump the epoch and reset sequences (idempotent) or abort (transactional)."),
    (46, "DUPLICATE_SEQUENCE_NUMBER", 0, "The batch was already written; treat it as success."),
    (47, "INVALID_PRODUCER_EPOCH", FATAL, "A newer producer epoch exists; this producer is fenced, close it."),
    (48, "INVALID_TXN_STATE", 0,
     "The transaction is in the wrong state for this request (e.g. already timed out); abort it."),
    (49, "INVALID_PRODUCER_ID_MAPPING", 0,
     "The producer id is not assigned to this transactional id (it expired); re-initialize."),
    (50, "INVALID_TRANSACTION_TIMEOUT", FATAL,
     "transaction.timeout.ms exceeds the broker's transaction.max.timeout.ms; lower it."),
    (51, "CONCURRENT_TRANSACTIONS", RETRY,
     "The previous transaction is still completing; retry after a short backoff."),
    (52, "TRANSACTION_COORDINATOR_FENCED", 0, "A newer transaction coordinator exists; an inter-broker condition."),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", FATAL,
     "Not authorized for the transactional id; grant WRITE/DESCRIBE on it."),
    (54, "SECURITY_DISABLED", 0, "Security features are disabled on the broker."),
    (55, "OPERATION_NOT_ATTEMPTED", 0, "The broker skipped this operation because another in the batch failed."),
    (56, "KAFKA_STORAGE_ERROR", RETRY | META,
     "The broker hit a disk error; refresh metadata and retry (leadership will move)."),
    (57, "LOG_DIR_NOT_FOUND", 0, "The log directory is not configured on the broker."),
    (58, "SASL_AUTHENTICATION_FAILED", FATAL,
     "SASL authentication failed; check the username, password and mechanism."),
    (59, "UNKNOWN_PRODUCER_ID", 0,
     "The broker forgot this producer id (retention); bump the epoch and reset sequences, or abort."),
    (60, "REASSIGNMENT_IN_PROGRESS", 0, "A partition reassignment is in progress; try later."),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", 0, "Delegation tokens are disabled on the broker."),
    (62, "DELEGATION_TOKEN_NOT_FOUND", 0, "The delegation token is unknown."),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", 0, "The principal is not the token's owner or renewer."),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", 0,
     "Delegation token requests need an authenticated (SASL or mTLS) connection."),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", 0, "Not authorized for the delegation token."),
    (66, "DELEGATION_TOKEN_EXPIRED", 0, "The delegation token expired; renew or recreate it."),
    (67, "INVALID_PRINCIPAL_TYPE", 0, "The principal type is not supported."),
    (68, "NON_EMPTY_GROUP", 0, "The group still has members; stop them first."),
    (69, "GROUP_ID_NOT_FOUND", 0, "The group does not exist."),
    (70, "FETCH_SESSION_ID_NOT_FOUND", RETRY, "The fetch session expired; start a new one."),
    (71, "INVALID_FETCH_SESSION_EPOCH", RETRY, "The fetch session epoch is wrong; start a new session."),
    (72, "LISTENER_NOT_FOUND", RETRY | META,
     "The leader has no listener matching this connection; refresh metadata, check listeners."),
    (73, "TOPIC_DELETION_DISABLED", 0, "Topic deletion is disabled (delete.topic.enable=false)."),
    (74, "FENCED_LEADER_EPOCH", RETRY | META,
     "Our leader epoch is older than the broker's; refresh metadata and retry."),
    (75, "UNKNOWN_LEADER_EPOCH", RETRY, "Our leader epoch is newer than the broker's; retry after a backoff."),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", 0,
     "The codec is not allowed here (e.g. zstd before Produce v7); change compression.type."),
    (77, "STALE_BROKER_EPOCH", 0, "The broker epoch changed; an inter-broker condition."),
    (78, "OFFSET_NOT_AVAILABLE", RETRY, "The new leader's high watermark has not caught up yet; retry."),
    (79, "MEMBER_ID_REQUIRED", 0, "The group member must rejoin with the member id it was given."),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", RETRY | META, "The preferred leader is not available; retry later."),
    (81, "GROUP_MAX_SIZE_REACHED", 0, "The consumer group is at group.max.size."),
    (82, "FENCED_INSTANCE_ID", 0, "Another member uses this group.instance.id; this one is fenced."),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", RETRY | META, "No eligible leader for the partition; retry later."),
    (84, "ELECTION_NOT_NEEDED", RETRY | META, "The partition already has its preferred leader."),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", 0, "There is no reassignment to cancel."),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", 0, "The group is subscribed to the topic; unsubscribe before deleting offsets."),
    (87, "INVALID_RECORD", 0, "The broker rejected a record (e.g. null key on a compacted topic); fix the data."),
    (88, "UNSTABLE_OFFSET_COMMIT", RETRY, "Pending transactional offsets are not yet stable; retry."),
    (89, "THROTTLING_QUOTA_EXCEEDED", RETRY, "A mutation quota was exceeded; retry after the throttle time."),
    (90, "PRODUCER_FENCED", FATAL,
     "A newer producer with the same transactional.id exists; this one is fenced, close it."),
    (91, "RESOURCE_NOT_FOUND", 0, "The request referred to a resource that does not exist."),
    (92, "DUPLICATE_RESOURCE", 0, "The request named the same resource twice."),
    (93, "UNACCEPTABLE_CREDENTIAL", 0, "The credential does not meet the broker's criteria."),
    (94, "INCONSISTENT_VOTER_SET", 0, "KRaft voter sets disagree; a controller condition."),
    (95, "INVALID_UPDATE_VERSION", 0, "The feature update version is invalid."),
    (96, "FEATURE_UPDATE_FAILED", 0, "Updating finalized features failed on the broker."),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", 0,
     "A forwarded request's principal could not be read; a broker condition."),
    (98, "SNAPSHOT_NOT_FOUND", 0, "The requested KRaft snapshot does not exist."),
    (99, "POSITION_OUT_OF_RANGE", 0, "The requested snapshot position is out of range."),
    (100, "UNKNOWN_TOPIC_ID", RETRY | META, "The broker does not know this topic id; refresh metadata."),
    (101, "DUPLICATE_BROKER_REGISTRATION", 0, "The broker id is already registered; a broker condition."),
    (102, "BROKER_ID_NOT_REGISTERED", 0, "The broker id is not registered; a broker condition."),
    (103, "INCONSISTENT_TOPIC_ID", RETRY | META,
     "The topic id does not match the log (topic recreated?); refresh metadata."),
    (104, "INCONSISTENT_CLUSTER_ID", 0, "The cluster id does not match; a broker condition."),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", 0, "The transactional id is unknown to the coordinator."),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", RETRY, "The fetch session mixed topic ids and names; start a new session."),
    (107, "INELIGIBLE_REPLICA", 0, "The new ISR contains an ineligible replica; a broker condition."),
    (108, "NEW_LEADER_ELECTED", 0, "The ISR changed but the leader moved; a broker condition."),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", 0, "The offset now lives in tiered storage."),
    (110, "FENCED_MEMBER_EPOCH", 0, "The group member epoch is fenced; rejoin the group."),
    (111, "UNRELEASED_INSTANCE_ID", 0, "The group.instance.id is still held by another member."),
    (112, "UNSUPPORTED_ASSIGNOR", 0, "The group assignor is not supported."),
    (113, "STALE_MEMBER_EPOCH", 0, "The group member epoch is stale; retry after the next heartbeat."),
    (114, "MISMATCHED_ENDPOINT_TYPE", 0, "The request went to the wrong kind of endpoint (broker vs controller)."),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", 0, "This endpoint type is not supported."),
    (116, "UNKNOWN_CONTROLLER_ID", 0, "The controller id is unknown."),
    (117, "UNKNOWN_SUBSCRIPTION_ID", 0, "The client telemetry subscription id is stale; fetch a new subscription."),
    (118, "TELEMETRY_TOO_LARGE", 0, "The client telemetry payload is too large."),
    (119, "INVALID_REGISTRATION", 0, "The broker registration is invalid; a broker condition."),
    (120, "TRANSACTION_ABORTABLE", 0,
     "The transaction cannot complete; abort it, then the transactional id can be reused."),
    (121, "INVALID_RECORD_STATE", 0, "The share-group record state is invalid; the acknowledgement failed."),
    (122, "SHARE_SESSION_NOT_FOUND", RETRY, "The share session was not found; start a new one."),
    (123, "INVALID_SHARE_SESSION_EPOCH", RETRY, "The share session epoch is wrong; start a new session."),
    (124, "FENCED_STATE_EPOCH", 0, "The share-group state epoch did not match; a broker condition."),
    (125, "INVALID_VOTER_KEY", 0, "The KRaft voter key does not match; a controller condition."),
    (126, "DUPLICATE_VOTER", 0, "The KRaft voter already exists."),
    (127, "VOTER_NOT_FOUND", 0, "The KRaft voter does not exist."),
    (128, "INVALID_REGULAR_EXPRESSION", 0, "The subscription regular expression is invalid."),
    (129, "REBOOTSTRAP_REQUIRED", 0, "Client metadata is too stale to repair; reconnect through bootstrap.servers."),
    (130, "STREAMS_INVALID_TOPOLOGY", 0, "The Kafka Streams topology is invalid."),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", 0, "The Kafka Streams topology epoch is invalid."),
    (132, "STREAMS_TOPOLOGY_FENCED", 0, "The Kafka Streams topology epoch is outdated."),
    (133, "SHARE_SESSION_LIMIT_REACHED", RETRY, "The broker's share session limit is reached; retry later."),
)
# fmt: on


def _build() -> dict[int, ErrorCode]:
    table: dict[int, ErrorCode] = {}
    for code, name, flags, description in _ROWS:
        if code in table:
            # A duplicated row would silently shadow another; refuse at import time.
            raise RuntimeError(f"error code {code} declared twice")
        table[code] = ErrorCode(
            code, name, bool(flags & (RETRY | META)), bool(flags & META), bool(flags & FATAL), description
        )
    return table


#: code -> ErrorCode for every non-zero broker error code (0 = NONE is success and has no entry).
ERROR_CODES: dict[int, ErrorCode] = _build()

#: The error code of a successful answer (Kafka's NONE): no row in the table, no error class.
NO_ERROR = 0


def class_name_for(name: str) -> str:
    """The exception class name for a protocol NAME: CamelCase plus ``Error``, without a doubled ``ErrorError``.

    ``NOT_LEADER_OR_FOLLOWER`` -> ``NotLeaderOrFollowerError``; ``KAFKA_STORAGE_ERROR`` -> ``KafkaStorageError``.
    ``UNSUPPORTED_VERSION`` is the one exception: ``BrokerUnsupportedVersionError``, because the local
    ``UnsupportedVersionError`` (no common version) already has the plain name.
    """
    if name == "UNSUPPORTED_VERSION":
        return "BrokerUnsupportedVersionError"
    words = name.split("_")
    if words[-1] == "ERROR":
        words = words[:-1]
    return "".join(w.capitalize() for w in words) + "Error"
