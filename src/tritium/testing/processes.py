"""What a server process left behind, read from /proc and /dev/shm: its child processes,
whether one has exited, and named tritium shared-memory segments."""

from __future__ import annotations

import os


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (children of any of its threads)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def exited(pid: int) -> bool:
    """Whether ``pid`` is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def tritium_shm_entries() -> set[str]:
    """Named segments in /dev/shm with "tritium" in their name. Arenas are memfds and never
    named, so any such segment is a leak; other programs' segments come and go meanwhile."""
    if not os.path.isdir("/dev/shm"):
        return set()
    return {name for name in os.listdir("/dev/shm") if "tritium" in name}
