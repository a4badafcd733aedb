"""The TCP connections a torch process group opened, so an abort can break them.

Why: a gloo collective blocked on a peer that is still alive does not notice
that the generation ended. torch < 2.6 has no abort for gloo, and
destroy_process_group() only drops torch's registry entry: while DDP (or any
other reference) holds the group, its sockets stay open and a rank blocked on
this one waits out the group's timeout (30 min by default). Shutting the
sockets down (shutdown(2), not close: gloo still owns the descriptors) makes
every pending send/recv on both ends fail at once with "Connection closed by
peer", which elastic.torch's trainers already handle as a failed collective.

Which sockets: the TCP sockets that appeared while init_process_group ran
(gloo connects its full mesh there), listeners excepted. Each is remembered
with its inode, so a descriptor that gloo closed and the process reused for
something else is never touched. Linux only (/proc/self/fd); elsewhere nothing is captured and
abort falls back to destroy alone.
"""

import os
import socket
import stat
from typing import Callable, Dict, List, Tuple, TypeVar

_FD_DIR = "/proc/self/fd"
_T = TypeVar("_T")


def _socket_inodes() -> Dict[int, int]:
    """fd -> inode of every socket descriptor of this process ({} without /proc)."""
    found: Dict[int, int] = {}
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return found
    for name in names:
        try:
            fd = int(name)
            st = os.fstat(fd)
        except (ValueError, OSError):  # the listing's own descriptor, or one closed meanwhile
            continue
        if stat.S_ISSOCK(st.st_mode):
            found[fd] = st.st_ino
    return found


def _inode(fd: int) -> int:
    try:
        return os.fstat(fd).st_ino
    except OSError:
        return -1


def _is_tcp_connection(fd: int) -> bool:
    """A TCP socket that is not a listener: no collective waits on gloo's
    listener, and its accept loop is not written for one shut under it."""
    try:
        probe = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    try:
        if probe.family not in (socket.AF_INET, socket.AF_INET6) or probe.type != socket.SOCK_STREAM:
            return False
        return probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0
    except OSError:
        return False
    finally:
        probe.close()  # closes the duplicate only


class GroupSockets:
    """The TCP sockets of one process group."""

    def __init__(self, sockets: List[Tuple[int, int]]):
        self._sockets = sockets  # (fd, inode)

    @classmethod
    def capture(cls, create: Callable[[], _T]) -> Tuple[_T, "GroupSockets"]:
        """Runs create() (the group's construction) and returns its result with
        the TCP sockets that were opened while it ran and are still open."""
        before = _socket_inodes()
        result = create()
        after = _socket_inodes()
        opened = [(fd, ino) for fd, ino in sorted(after.items()) if before.get(fd) != ino and _is_tcp_connection(fd)]
        return result, cls(opened)

    def __len__(self) -> int:
        return len(self._sockets)

    def shutdown(self) -> int:
        """Shuts down, in both directions, every remembered socket that is still
        the same socket; forgets them all. Returns how many were shut down.
        Safe from any thread: it closes only its own duplicates, never gloo's descriptors."""
        sockets, self._sockets = self._sockets, []
        count = 0
        for fd, ino in sockets:
            try:
                held = os.dup(fd)  # pins the socket: the check and the shutdown see the same one
            except OSError:
                continue  # closed meanwhile
            if _inode(held) != ino:  # gloo closed it and the number now names something else
                os.close(held)
                continue
            with socket.socket(fileno=held) as pinned:  # closes `held` only
                try:
                    pinned.shutdown(socket.SHUT_RDWR)
                    count += 1
                except OSError:  # a connection already gone
                    pass
        return count
