#!/usr/bin/python3
# Two connections to the primary of one key, on the same RESP loop: one
# pipelines SETs of the key (replicated asynchronously: the round holds the
# key's stripe until the backup's reply, which the loop reads), the other
# DELs it (parked on a worker of that loop, which takes the same stripe;
# before DELs were parked the loop ran them itself). Runs for `seconds`,
# and on (up to 120 s more) until one write has met the other's lock at
# least once (kvstore_key_lock_waits_total in INFO, the race this is
# about). Exits 0 when every command of both succeeded, 1 at the first
# error, 2 if the race never happened.
#
#   loop_write_race.py PORT_A PORT_B SECONDS
import sys
import threading
import time

import redis

ports = [int(sys.argv[1]), int(sys.argv[2])]
seconds = float(sys.argv[3])
key = "race"
port = ports[0]
try:
    redis.Redis(port=port).set(key, "x")
except redis.exceptions.ResponseError:  # MOVED: the other node leads it
    port = ports[1]
# The race starts once one DEL of the key has been acknowledged, so that a
# failure below is the race's, not the new cluster's first moments (one
# loaded run in 14 saw the first DEL fail with a backup's timeout ~1 s
# after the map was installed; that is a separate, open question).
settle = time.monotonic() + 60
while True:
    try:
        redis.Redis(port=port).delete(key)
        break
    except redis.exceptions.RedisError as e:
        if time.monotonic() > settle:
            print("no DEL succeeded in 60 s: %s" % e)
            sys.exit(1)
        time.sleep(0.1)
start = time.monotonic()
give_up = start + seconds + 120
errors = []
counts = {"set": 0, "del": 0}


def metric(name):
    info = redis.Redis(port=port).info("metrics")
    return int(info.get(name, 0))


def lock_waits():
    return metric("kvstore_key_lock_waits_total")


def running():
    now = time.monotonic()
    if errors or now >= give_up:
        return False
    return now < start + seconds or lock_waits() == 0


def setter():
    r = redis.Redis(port=port)
    while running():
        try:
            p = r.pipeline(transaction=False)
            for _ in range(8):
                p.set(key, "v" * 100)
            p.execute()
            counts["set"] += 8
        except redis.exceptions.RedisError as e:
            errors.append("SET: %s" % e)


def deleter():
    r = redis.Redis(port=port)
    while running():
        try:
            r.delete(key)
            counts["del"] += 1
        except redis.exceptions.RedisError as e:
            errors.append("DEL: %s" % e)


threads = [threading.Thread(target=setter), threading.Thread(target=deleter)]
for t in threads:
    t.start()
for t in threads:
    t.join()
waits = lock_waits()
print("port %d: %d SETs, %d DELs, %d key lock waits, %d commands parked, %d loop lock waits "
      "served" % (port, counts["set"], counts["del"], waits,
                  metric("kvstore_resp_commands_parked_total"),
                  metric("kvstore_resp_lock_waits_served_total")))
for e in errors[:3]:
    print(e[:300])
sys.exit(1 if errors else 0 if waits > 0 else 2)
