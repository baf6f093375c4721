#!/usr/bin/env python3
# Helpers of tests/bench/perf_report.sh that speak RESP to kvserver or
# redis-server on 127.0.0.1 (a benchmark tool, not a test):
#
#   perf_keys.py load PORT COUNT VALUE_SIZE
#       SETs key:000000000000 .. key:<COUNT-1> (16-byte keys, the names
#       redis-benchmark's -r gives "key:__rand_int__") to VALUE_SIZE-byte
#       values, pipelined (one sender thread, one reader thread, at most
#       2 x BATCH commands in flight). Prints one JSON line: count, errors,
#       first error, seconds.
#   perf_keys.py info PORT
#       INFO as one JSON object of its "name:value" lines.
#
# Exit status 0 when it ran (errors are counted in the JSON), 1 when the
# connection failed.
import json
import socket
import sys
import threading
import time

BATCH = 10000


def load(port, count, value_size):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    value = b"v" * value_size
    tail = b"\r\n$%d\r\n%s\r\n" % (value_size, value)
    in_flight = threading.Semaphore(2)
    result = {"count": count, "errors": 0, "first_error": ""}

    def reader():
        # Every SET reply is one line: "+OK" or "-<error>".
        seen, rest = 0, b""
        while seen < count:
            chunk = sock.recv(1 << 20)
            if not chunk:
                result["first_error"] = result["first_error"] or "connection closed"
                result["errors"] += count - seen
                return
            lines = (rest + chunk).split(b"\r\n")
            rest = lines.pop()
            for line in lines:
                if line[:1] == b"-":
                    result["errors"] += 1
                    if not result["first_error"]:
                        result["first_error"] = line[1:].decode(errors="replace")[:200]
            before = seen // BATCH
            seen += len(lines)
            for _ in range(seen // BATCH - before):
                in_flight.release()
        in_flight.release()

    start = time.monotonic()
    thread = threading.Thread(target=reader)
    thread.start()
    for first in range(0, count, BATCH):
        in_flight.acquire()
        last = min(count, first + BATCH)
        sock.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d%s" % (i, tail)
                              for i in range(first, last)))
    thread.join()
    result["seconds"] = round(time.monotonic() - start, 2)
    sock.close()
    print(json.dumps(result))


def info(port):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"*1\r\n$4\r\nINFO\r\n")
    data = b""
    while b"\r\n" not in data:
        data += sock.recv(1 << 16)
    header, _, data = data.partition(b"\r\n")
    length = int(header[1:])
    while len(data) < length + 2:
        data += sock.recv(1 << 16)
    sock.close()
    fields = {}
    for line in data[:length].decode().splitlines():
        if ":" in line and not line.startswith("#"):
            name, _, value = line.partition(":")
            fields[name] = value
    print(json.dumps(fields))


def main():
    try:
        if sys.argv[1:2] == ["load"] and len(sys.argv) == 5:
            load(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        elif sys.argv[1:2] == ["info"] and len(sys.argv) == 3:
            info(int(sys.argv[2]))
        else:
            print(__doc__ or "usage: see the comment at the top", file=sys.stderr)
            return 2
    except OSError as e:
        print(f"perf_keys.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
