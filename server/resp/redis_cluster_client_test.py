#!/usr/bin/env python3
# Copyright 2026 The kvstore Authors.
#
# A cluster-aware Redis client (redis-py's redis.cluster.RedisCluster, Debian
# python3-redis) against kvstore's RESP port in cluster mode. Run by
# resp_cluster_test (RespClusterTest.RedisPyClusterClient) with the port of
# one node: the client learns the slots from CLUSTER SLOTS, the keys of each
# command from COMMAND, and must route every request itself. The C++ test
# then checks that every key landed on its slot's primary only.
#
# With "ask <key>", the C++ test (MigrationRedisPyFollowsAsk) has put the
# key's slot in a handed-off migration: the node CLUSTER SLOTS names answers
# -ASK, and the client must send ASKING and the command to the target.
#
# Usage: redis_cluster_client_test.py <port> <seed> <keys> [ask <key>]
import random
import sys

from redis.cluster import RedisCluster


def follow_ask(rc, rng, key):
    value = "%x" % rng.getrandbits(64)
    assert rc.set(key, value) is True, key
    got = rc.get(key)
    assert got == value.encode(), (key, got, value)
    print("PASS ask", key, value)


def main():
    port, seed, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print("seed", seed)
    rng = random.Random(seed)
    rc = RedisCluster(host="127.0.0.1", port=port)
    if len(sys.argv) == 6 and sys.argv[4] == "ask":
        follow_ask(rc, rng, sys.argv[5])
        return
    values = {}
    nodes = set()
    for i in range(count):
        key = "py:%d" % i
        # The primary of the key's slot as the client learnt it (CLUSTER
        # SLOTS). Not get_primaries(): redis-py labels a node by its last
        # role seen, and a kvstore node is primary of one shard and backup
        # of another.
        nodes.add(rc.get_node_from_key(key).port)
        values[key] = "%x" % rng.getrandbits(64)
        assert rc.set(key, values[key]) is True, key
    for key, value in values.items():
        got = rc.get(key)
        assert got == value.encode(), (key, got, value)
        # The client routed to the node CLUSTER SLOTS names for the key's slot.
        assert rc.keyslot(key) == int(rc.cluster_keyslot(key)), key
    assert len(nodes) == 3, nodes
    # Multi-key commands within one slot (hash tags) go in one request.
    assert rc.mset({"{tag}a": "1", "{tag}b": "2"}) is True
    assert rc.mget("{tag}a", "{tag}b") == [b"1", b"2"]
    assert rc.delete("{tag}a", "{tag}b") == 2
    # Across slots the client splits the request itself.
    keys = list(values)[:10]
    assert rc.mget_nonatomic(keys) == [values[k].encode() for k in keys]
    assert rc.exists("py:0") == 1
    cache_commands(rc, nodes)
    print("PASS", len(values), "keys over", len(nodes), "primaries")


def cache_commands(rc, nodes):
    # The cache commands route by slot like GET and SET: counters, appends
    # and TTLs on keys spread over every primary (the C++ test checks each
    # key landed on its primary only).
    seen = set()
    for i in range(30):
        key = "cache:%d" % i
        seen.add(rc.get_node_from_key(key).port)
        assert rc.incr(key) == 1, key
        assert rc.incrby(key, 41) == 42, key
        assert rc.incrbyfloat(key, 0.5) == 42.5, key
        assert rc.append(key, "x") == 5, key
        assert rc.strlen(key) == 5, key
        assert rc.expire(key, 100) is True, key
        assert 0 < rc.ttl(key) <= 100, key
        assert rc.persist(key) is True, key
        assert rc.ttl(key) == -1, key
        assert rc.type(key) == b"string", key
        assert rc.getset(key, "v") == b"42.5x", key
        assert rc.setnx(key, "w") is False, key
        assert rc.getex(key, px=50000) == b"v", key
    assert seen == nodes, (seen, nodes)
    # One slot through a hash tag: MSETNX and TOUCH in one request.
    assert rc.msetnx({"{t}1": "a", "{t}2": "b"}) is True
    assert rc.touch("{t}1", "{t}2") == 2
    assert rc.getdel("{t}1") == b"a"
    assert rc.delete("{t}2") == 1


if __name__ == "__main__":
    main()
