"""Golden cases for CLUSTER_UNREACHABLE, shared by the unit and Spark tests.

Each case: (number, error, error_reason, brokers in the record, expected cause or None, reason).
"""

_ZK_VIEW = [{"id": 1, "live": False, "reachable": None}, {"id": 2, "live": True, "reachable": None}]
_POLLED = [{"id": 1, "live": True}, {"id": 2, "live": True}]

CASES = [
    (1, None, None, _POLLED, None, "the poll succeeded"),
    (2, "NoBrokersAvailable", None, [], "unreachable", "nothing answered, nothing else said who is registered (KRaft)"),
    (3, "no broker answered", "unreachable", [], "unreachable", "the collector's own reason"),
    (4, "SASL authentication failed", "authentication_failed", [], "authentication_failed", "a refused login"),
    (5, "certificate verify failed", "tls_failed", [], "tls_failed", "a certificate the CA did not sign"),
    (6, "closed during the handshake", "protocol_mismatch", [], "protocol_mismatch", "SASL_SSL configured, PLAINTEXT listener"),
    (7, "Metadata: cluster authorization failed", "authorization_failed", [], "authorization_failed",
     "logged in, refused the Metadata krm needs"),
    (8, "no broker answered", "unreachable", _ZK_VIEW, None,
     "ZooKeeper still says who is registered: krm sees the cluster (BROKER_DOWN per broker)"),
    (9, "no broker answered", "some_future_reason", [], "unreachable", "a reason this version does not know"),
]
