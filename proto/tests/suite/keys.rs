//! The Redis names of cluster spec §2 and §12.

use turnstone_proto::keys::{DEFAULT_PREFIX, Keys, RESPONSE_TTL_SECS};

#[test]
fn names_seen_in_the_live_trace() {
    let k = Keys::default();
    assert_eq!(k.prefix(), DEFAULT_PREFIX);
    // `BLPOP turnstone:inbound:node-a turnstone:inbound 5`
    assert_eq!(
        [k.inbound_node("node-a"), k.inbound()],
        ["turnstone:inbound:node-a", "turnstone:inbound"]
    );
    assert_eq!(k.response("9581019dbea9"), "turnstone:resp:9581019dbea9");
    assert_eq!(k.ws_owner("W"), "turnstone:ws:W");
    assert_eq!(k.node_heartbeat("node-a"), "turnstone:node:node-a");
    assert_eq!(k.events_global(), "turnstone:events:global");
    assert_eq!(k.events_cluster(), "turnstone:events:cluster");
    assert_eq!(RESPONSE_TTL_SECS, 600);
}

#[test]
fn every_name_starts_with_the_prefix() {
    let k = Keys::new("sim7");
    for name in [
        k.inbound(),
        k.inbound_node("n"),
        k.response("r"),
        k.ws_owner("w"),
        k.node_heartbeat("n"),
        k.node_heartbeat_pattern(),
        k.events_ws("w"),
        k.events_global(),
        k.events_cluster(),
        k.scheduler_lock(),
        k.dead_letter(),
        k.ws_pin("w"),
        k.bridge_cursor("n"),
        k.bridge_wake("n"),
        k.bridge_decisions("n"),
        k.stream("w"),
    ] {
        assert!(name.starts_with("sim7:"), "{name}");
    }
    // Processing lists carry their queue's name as the hash tag (one Redis Cluster slot).
    assert_eq!(
        k.processing(&k.inbound(), "n"),
        "{sim7:inbound}:processing:n"
    );
    assert_eq!(
        k.node_id_from_heartbeat_key(&k.node_heartbeat("n-1")),
        Some("n-1")
    );
}
