"""Counting what a fault may leave behind: TCP connections from this host to the test network's client addresses
(every process: the test, Spark's Python workers), and this process's threads."""

from __future__ import annotations

import sys
import threading
import traceback


def connections_to(prefix: str) -> int:
    """Sockets of any process in the host's namespace that are connecting or connected to an address starting
    with ``prefix`` (e.g. ``"10.251.7."``): /proc/net/tcp lists them all, whoever owns them."""
    octets = [int(x) for x in prefix.rstrip(".").split(".")]
    count = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            remote_hex, state = fields[2].split(":")[0], fields[3]
            # /proc/net/tcp shows an IPv4 address as one little-endian 32-bit hex number.
            remote = [int(remote_hex[i:i + 2], 16) for i in (6, 4, 2, 0)]
            # 01 ESTABLISHED, 02 SYN_SENT, 08 CLOSE_WAIT: held by an open socket (TIME_WAIT and the rest are not)
            if remote[:len(octets)] == octets and state in ("01", "02", "08"):
                count += 1
    return count


def thread_names() -> list[str]:
    """The names of this process's running threads. A thread started outside ``threading`` that once called into
    Python stays listed by ``threading.enumerate`` as a Dummy thread after it ended (Python 3.11): only threads
    that still have a frame count."""
    running = sys._current_frames()
    return sorted(t.name for t in threading.enumerate() if t.ident in running)


def leftover_threads(before: list[str]) -> str:
    """The threads not in ``before``, each with the stack it is in: what a failed leak check names."""
    frames = sys._current_frames()
    described = []
    for thread in sorted(threading.enumerate(), key=lambda t: t.name):
        if thread.name in set(before):
            continue
        frame = frames.get(thread.ident) if thread.ident is not None else None
        if frame is not None:  # a thread without one has ended (see thread_names)
            described.append(f"{thread.name} at {''.join(traceback.format_stack(frame)[-4:])}")
    return "; ".join(described) or "none"
