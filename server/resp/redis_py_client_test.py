#!/usr/bin/python3
# Copyright 2026 The kvstore Authors.
#
# What redis-py (Debian's python3-redis) does with the CLIENT commands of a
# kvstore RESP port: client_name= makes it send CLIENT SETNAME on connect,
# and its client_* helpers parse CLIENT ID / GETNAME / INFO / LIST replies.
# Run by resp_client_test.cc: python3 redis_py_client_test.py <port>.
# Prints "PASS" as its last line, or fails with a traceback.

import sys

import redis


def main():
    port = int(sys.argv[1])
    r = redis.Redis(host="127.0.0.1", port=port, client_name="py-worker", decode_responses=True)
    assert r.ping()
    assert r.client_getname() == "py-worker", r.client_getname()
    my_id = r.client_id()
    info = r.client_info()
    assert info["id"] == my_id, (info, my_id)
    assert info["name"] == "py-worker", info
    assert info["cmd"] == "client|info", info
    assert info["resp"] == "2", info
    assert info["db"] == 0 and info["multi"] == -1, info
    assert info["laddr"] == "127.0.0.1:%d" % port, info

    # What redis-py 5 and other libraries send on connect.
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == "OK"
    assert r.execute_command("CLIENT", "SETINFO", "LIB-VER", redis.__version__) == "OK"
    assert r.client_info()["lib-name"] == "redis-py"

    # A second client sees the first in CLIENT LIST, by name and id.
    other = redis.Redis(host="127.0.0.1", port=port, client_name="py-other",
                        decode_responses=True)
    other_id = other.client_id()
    clients = {c["name"]: c for c in other.client_list()}
    assert clients["py-worker"]["id"] == str(my_id), clients
    assert clients["py-worker"]["lib-name"] == "redis-py", clients
    assert clients["py-other"]["cmd"] == "client|list", clients
    assert [c["id"] for c in other.client_list(client_id=[str(my_id)])] == [str(my_id)]

    assert r.client_setname("renamed")
    assert r.client_getname() == "renamed"
    try:
        r.client_setname("has space")
        raise AssertionError("a name with a space was accepted")
    except redis.ResponseError as e:
        assert "cannot contain spaces" in str(e), e

    # CLIENT KILL by id closes the other connection; redis-py reconnects it
    # (a new id). The close happens on the server's loop in its own time, so
    # a command may still reach the old connection, or die with it: ask
    # until the answer comes from a new one.
    assert r.client_kill_filter(_id=other_id) == 1
    new_id = other_id
    for _ in range(1000):
        try:
            new_id = other.client_id()
        except redis.ConnectionError:
            continue
        if new_id != other_id:
            break
    assert new_id > other_id, (new_id, other_id)
    assert r.set("py:k", "v") and r.get("py:k") == "v"
    print("PASS")


if __name__ == "__main__":
    main()
