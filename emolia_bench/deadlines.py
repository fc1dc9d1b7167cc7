"""Deadlines on sockets: one watchdog thread that shuts down the sockets of whatever is late.

A socket timeout bounds each read, not a whole exchange: a peer that sends one byte every few
seconds keeps a request alive forever. Both ends here need the whole exchange bounded — the
endpoint client (``--timeout`` per request) and the sham server (the time a request may take
to arrive) — so each *key* (a client thread, a server connection) has sockets and, while an
exchange is under way, a deadline. Past it, the watchdog shuts the key's sockets down, which
makes the blocked read return at once; ``disarm`` then tells the owner it was cut.
"""

from __future__ import annotations

import socket
import threading
import time


class SocketDeadlines:
    def __init__(self, poll: float = 0.05, name: str = "socket-deadlines"):
        self._lock = threading.Lock()
        self._sockets: dict = {}  # key -> sockets shut down when the key is late
        self._deadline: dict = {}  # key -> monotonic deadline of its exchange under way
        self._cut: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(poll,), daemon=True, name=name)
        self._thread.start()

    def add_socket(self, key, sock) -> None:
        with self._lock:
            self._sockets.setdefault(key, []).append(sock)

    def arm(self, key, seconds: float, sockets=None) -> None:
        """Start an exchange of ``key`` that must end within ``seconds``; ``sockets`` replaces the
        key's sockets when given."""
        with self._lock:
            if sockets is not None:
                self._sockets[key] = list(sockets)
            self._deadline[key] = time.monotonic() + seconds
            self._cut.discard(key)

    def disarm(self, key, forget: bool = False) -> bool:
        """End ``key``'s exchange; True when the watchdog had cut it. ``forget`` also drops its sockets."""
        with self._lock:
            self._deadline.pop(key, None)
            if forget:
                self._sockets.pop(key, None)
            if key in self._cut:
                self._cut.discard(key)
                return True
            return False

    def _watch(self, poll: float) -> None:
        while not self._stop.wait(poll):
            now = time.monotonic()
            with self._lock:
                for key in [k for k, d in self._deadline.items() if d < now]:
                    del self._deadline[key]
                    self._cut.add(key)
                    for sock in self._sockets.pop(key, []):
                        try:
                            sock.shutdown(socket.SHUT_RDWR)
                        except OSError:
                            pass  # already closed

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
