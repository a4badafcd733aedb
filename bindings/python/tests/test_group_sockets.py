"""GroupSockets: the connections opened while a group was created are shut
down (a thread blocked reading one wakes), the listener and older sockets are
left alone, and a descriptor reused by another socket is never touched."""

import os
import socket
import threading

from elastic.group_sockets import GroupSockets


def connected_pair(listener):
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    return client, accepted


def test_a_blocked_reader_wakes_and_older_sockets_and_the_listener_are_left_alone():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    older = connected_pair(listener)

    def create():
        return connected_pair(listener)

    (client, accepted), sockets = GroupSockets.capture(create)
    assert len(sockets) == 2  # the two ends of the new connection
    got = []
    reader = threading.Thread(target=lambda: got.append(client.recv(10)))
    reader.start()
    assert sockets.shutdown() == 2
    reader.join(10)
    assert not reader.is_alive() and got == [b""]  # woke with end-of-stream
    assert len(sockets) == 0 and sockets.shutdown() == 0
    older[0].sendall(b"x")
    assert older[1].recv(1) == b"x"  # untouched
    assert connected_pair(listener)[1].fileno() >= 0  # still accepts
    for s in (client, accepted, listener, *older):
        s.close()


def test_a_descriptor_reused_by_another_socket_is_not_touched():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    (client, accepted), sockets = GroupSockets.capture(lambda: connected_pair(listener))
    number = client.fileno()
    client.close()  # the group went away; the number is free
    other, peer = connected_pair(listener)
    if other.fileno() != number:  # make the number name the new socket
        os.dup2(other.fileno(), number)
        other.close()
        other = socket.socket(fileno=number)
    assert sockets.shutdown() == 1  # only `accepted`, still the same socket
    other.sendall(b"y")
    assert peer.recv(1) == b"y"
    for s in (accepted, other, peer, listener):
        s.close()
