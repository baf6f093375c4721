#!/usr/bin/env python3
"""Prints the kvserver threads that wait on a lock, from gdb's stacks.

Usage: waiting_threads.py STACKS_FILE

STACKS_FILE holds, for each process, a line "=== kvserver pid N" and then
gdb's "thread apply all bt" output.  A thread is printed when its stack has
a lock wait (absl::Mutex, a HandoffMutex, a condition) under a kvstore
function that is not a thread's idle loop: after a failed case these are the
threads a stuck write is waiting in (the compose VM test's diagnosis).  Each
is one line: pid, thread name, then its kvstore frames, innermost first.
"""
import re
import sys

# Innermost kvstore frames of threads that are merely idle: loops waiting for
# work, and the pollers.
IDLE = re.compile(r"(Loop|Run|Sleep|Poll|WaitForEvent|Receive|NextFrame|AwaitWaiting|AwaitWatchEnd)$")
# A wait on a lock or a condition; timed sleeps (Notification with a
# timeout) are how periodic threads idle, and are not counted.
LOCK_WAIT = re.compile(r"Mutex::(Lock|LockSlow|Await|ReaderLock)|LockContended|CondVar::Wait")
TIMED_SLEEP = re.compile(r"WaitForNotificationWithTimeout")
FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(\S.*)$")
THREAD = re.compile(r'^Thread \d+ \(Thread 0x[0-9a-f]+ \(LWP \d+\) "([^"]*)"\)')


def short(fn):
    """The first kvstore name in a frame, without namespaces and arguments:
    KvStore::CommitEntry; a callback's frame (std::function's handler of a
    lambda) gives the function the lambda is in, marked "(lambda)"."""
    m = re.search(r"kvstore::(?:server::|initiator::|rdma::)?([\w:]+)", fn)
    name = m.group(1) if m else fn
    return name + (" (lambda)" if "lambda" in fn[m.end():m.end() + 200] and m else "")


def threads(text):
    pid = "?"
    name, frames = None, []
    for line in text.splitlines():
        if line.startswith("=== kvserver pid "):
            if name is not None:
                yield pid, name, frames
            pid, name, frames = line.split()[-1], None, []
            continue
        m = THREAD.match(line)
        if m:
            if name is not None:
                yield pid, name, frames
            name, frames = m.group(1), []
            continue
        m = FRAME.match(line)
        if m and name is not None:
            frames.append(m.group(1))
    if name is not None:
        yield pid, name, frames


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], errors="replace") as f:
        text = f.read()
    shown = 0
    for pid, name, frames in threads(text):
        ours = [short(fr) for fr in frames if "kvstore::" in fr]
        if not ours or not any(LOCK_WAIT.search(fr) for fr in frames):
            continue
        if any(TIMED_SLEEP.search(fr) for fr in frames):
            continue
        if IDLE.search(ours[0].split("::")[-1]):
            continue
        print("  pid %s %-16s %s" % (pid, name, " < ".join(ours[:6])))
        shown += 1
    if shown == 0:
        print("  no kvserver thread waits on a lock outside its idle loop")


if __name__ == "__main__":
    main()
