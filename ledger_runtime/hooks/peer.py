"""Who is at the other end of a loopback TCP connection: the user and the socket of the peer (Linux's
sock_diag netlink, one query per connection; ``/proc/net/tcp`` where netlink is not allowed), and
whether a process holds that socket (``/proc/PID/fd``). What the HTTP hook server decides with:
another user's connection is closed before a byte of it is read, and where the agent's process is
known, only that process speaks for it (a command the agent runs is a process of its own).

Everything here answers None where the system cannot say (not Linux, /proc hidden): the caller then
decides without it, as it did before.
"""

from __future__ import annotations

import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_NOCOOKIE = 0xFFFFFFFF
_REQUEST = struct.Struct("=IHHII BBBBI HH16s16sIII")  # nlmsghdr, inet_diag_req_v2 with its sockid
_HEADER = struct.Struct("=IHHII")
_MESSAGE = struct.Struct("=BBBB HH16s16sIII IIIII")  # inet_diag_msg: ... uid, inode at the end


def _address(ip: str) -> bytes:
    return socket.inet_aton(ip) + b"\0" * 12


def peer_of(conn: socket.socket) -> tuple[int, int] | None:
    """(uid, socket inode) of the process end of ``conn`` that is not ours (an IPv4 loopback
    connection accepted here); None where the system does not say."""
    try:
        here, there = conn.getsockname(), conn.getpeername()
    except OSError:
        return None
    return _by_netlink(there, here) or _by_proc(there, here)


def _by_netlink(src: tuple[str, int], dst: tuple[str, int]) -> tuple[int, int] | None:
    """The socket bound to ``src`` and connected to ``dst``, asked of the kernel by its address."""
    try:
        nl = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
    except (OSError, AttributeError):
        return None
    try:
        nl.settimeout(1.0)
        req = _REQUEST.pack(
            _REQUEST.size, SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0,
            socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF,
            socket.htons(src[1]), socket.htons(dst[1]), _address(src[0]), _address(dst[0]),
            0, INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE,
        )  # fmt: skip
        nl.send(req)
        data = nl.recv(65536)
    except OSError:
        return None
    finally:
        nl.close()
    if len(data) < _HEADER.size + _MESSAGE.size:
        return None
    _, kind, _, _, _ = _HEADER.unpack_from(data)
    if kind != SOCK_DIAG_BY_FAMILY:
        return None  # NLMSG_ERROR: no such socket, or not allowed
    fields = _MESSAGE.unpack_from(data, _HEADER.size)
    sport, dport = socket.ntohs(fields[4]), socket.ntohs(fields[5])
    if (sport, dport) != (src[1], dst[1]):
        return None
    return fields[-2], fields[-1]


def _hex_address(ip: str, port: int) -> str:
    """An IPv4 address and port as /proc/net/tcp writes them (the address in host order)."""
    return f"{struct.unpack('=I', socket.inet_aton(ip))[0]:08X}:{port:04X}"


def _by_proc(src: tuple[str, int], dst: tuple[str, int]) -> tuple[int, int] | None:
    """The same, from /proc/net/tcp (one line per socket of this network namespace)."""
    local, remote = _hex_address(*src), _hex_address(*dst)
    try:
        with open("/proc/net/tcp") as f:
            next(f, None)
            for line in f:
                parts = line.split()
                if len(parts) > 9 and parts[1] == local and parts[2] == remote:
                    return int(parts[7]), int(parts[9])
    except (OSError, ValueError):
        return None
    return None


def holds_socket(pid: int, inode: int) -> bool | None:
    """Whether process ``pid`` has the socket ``inode`` open; None where /proc does not say (the
    process is gone, or its descriptors cannot be read)."""
    target = f"socket:[{inode}]"
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == target:
                return True
        except OSError:
            continue
    return False


def descendants(pid: int) -> set[int]:
    """``pid`` and the processes below it, by their parents in /proc (a snapshot)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {pid}
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out
