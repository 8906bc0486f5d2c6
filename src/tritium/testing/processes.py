"""What a server process has and left behind, read from /proc and /dev/shm: its child
processes and the tree below it, whether one has exited, and named tritium shared-memory
segments. Tests read these here, once, rather than each with its own /proc reader."""

from __future__ import annotations

import os


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's pid under its parent's, read from each ``/proc/PID/stat``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:  # gone meanwhile
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, in pid order, zombies included.

    Read from every process's parent field: ``/proc/PID/task/PID/children`` lists only the
    children of the main thread, and the server starts workers from other threads too.
    """
    return sorted(_children_by_parent().get(pid, ()))


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it (children, their children, ...)."""
    children = _children_by_parent()
    tree = [pid]
    for current in tree:  # grows while it is walked: breadth first
        tree.extend(sorted(children.get(current, ())))
    return tree


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
