"""Where the machine's CPU went during a window: the server's processes by whom they serve, the clients, the rest.

Linux only (``/proc``). A backend is attributed to the client process whose TCP socket is at the other end of its
connection (``pg_stat_activity.client_port`` is a local port of that process), so the writers' backends, the
searching process's and the server's own workers (autovacuum, WAL writer, checkpointer) are told apart exactly,
whatever statements they ran. Used by bench/pg_writers.py to say what a search competes with during the writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CpuSplit"]

_TICK = float(os.sysconf("SC_CLK_TCK"))


def _cpu_s(pid: int) -> float:
    """User + system seconds of a process (all its threads), 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _children(parent: int) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            out.append(int(entry.name))
    return out


def _local_ports(pids: Sequence[int]) -> set[int]:
    """Local TCP ports of the sockets the processes ``pids`` hold open."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.scandir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(fd.path)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[9] in inodes:
                ports.add(int(cols[1].rpartition(":")[2], 16))
    return ports


def _machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, over all cores."""
    cols = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = cols[3] + cols[4]
    return (sum(cols[:8]) - idle) / _TICK, sum(cols[:8]) / _TICK


class CpuSplit:
    """CPU seconds per group between :meth:`start` and :meth:`stop`.

    ``clients`` names groups of client processes (label -> pids): their own CPU, and their backends' on the server.
    """

    def __init__(self, postmaster: int, clients: Mapping[str, Sequence[int]]) -> None:
        self._postmaster = postmaster
        self._clients = {k: list(v) for k, v in clients.items()}
        self._server0: dict[int, float] = {}
        self._client0: dict[str, float] = {}
        self._machine0 = (0.0, 0.0)

    def _server_now(self) -> dict[int, float]:
        return {pid: _cpu_s(pid) for pid in [self._postmaster, *_children(self._postmaster)]}

    def start(self) -> None:
        self._server0 = self._server_now()
        self._client0 = {k: sum(_cpu_s(p) for p in pids) for k, pids in self._clients.items()}
        self._machine0 = _machine_busy_s()

    def stop(self, conn: Any, seconds: float) -> dict[str, Any]:
        """The split, in cores (CPU seconds per wall second) over ``seconds``; ``conn`` reads pg_stat_activity."""
        server = self._server_now()
        clients = {k: sum(_cpu_s(p) for p in pids) for k, pids in self._clients.items()}
        busy, total = _machine_busy_s()
        owner_of_port = {port: k for k, pids in self._clients.items() for port in _local_ports(pids)}
        kinds: dict[int, str] = {}
        for pid, backend_type, port in conn.execute(
            "SELECT pid, backend_type, client_port FROM pg_stat_activity"
        ).fetchall():
            if backend_type == "client backend":
                kinds[int(pid)] = f"server for {owner_of_port.get(int(port or -1), 'other clients')}"
            else:
                kinds[int(pid)] = f"server: {backend_type}"
        groups: dict[str, float] = {}
        for pid, cpu in server.items():
            # A backend gone before the end (a closed connection) counts as "server: ended".
            label = "server: postmaster" if pid == self._postmaster else kinds.get(pid, "server: ended")
            groups[label] = groups.get(label, 0.0) + max(0.0, cpu - self._server0.get(pid, 0.0))
        for label, cpu in clients.items():
            groups[f"{label} (client)"] = max(0.0, cpu - self._client0.get(label, 0.0))
        wall = max(seconds, 1e-9)
        ours = sum(groups.values())
        machine_busy = busy - self._machine0[0]
        cores = (total - self._machine0[1]) / wall
        out: dict[str, Any] = {k: round(v / wall, 3) for k, v in sorted(groups.items())}
        out["server total"] = round(sum(v for k, v in groups.items() if k.startswith("server")) / wall, 3)
        out["machine busy"] = round(machine_busy / wall, 3)
        out["everything else on the machine"] = round(max(0.0, machine_busy - ours) / wall, 3)
        out["machine cores"] = round(cores, 2)
        return out
