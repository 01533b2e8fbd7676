"""The world's process: `World` served to the replicas over authenticated loopback
connections (`python -m vecsched.adapters.sim.ha.world_server CONFIG_JSON`), and the clients."""
from __future__ import annotations

import socket
import threading
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Listener

from .world import SimConfig, World, WorldError

AUTHKEY_ENV = "VECSCHED_HA_AUTHKEY"


class WorldUnavailable(Exception):
    """The world process did not answer."""


class WorldServer:
    """Serves one `World` to many clients over authenticated loopback connections;
    calls are applied one at a time."""

    def __init__(self, world: World, authkey: bytes):
        self.world = world
        self.listener = Listener(("127.0.0.1", 0), authkey=authkey)
        self.address = self.listener.address
        self._lock = threading.Lock()
        self.done = threading.Event()

    def serve_forever(self) -> None:
        while not self.done.is_set():
            try:
                conn = self.listener.accept()
            except (OSError, EOFError, AuthenticationError):
                continue                 # a failed handshake (or the wake-up call)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
        self.listener.close()

    def _serve(self, conn) -> None:
        with conn:
            while True:
                try:
                    op, args = conn.recv()
                except (EOFError, OSError):
                    return
                if op == "shutdown":
                    conn.send(("ok", None))
                    self.done.set()
                    # Closing the listener does not wake a blocked accept(): connect
                    # once so it returns and sees `done`.
                    socket.create_connection(self.address).close()
                    return
                try:
                    with self._lock:
                        result = ("ok", self.world.call(op, *args))
                except WorldError as e:
                    result = ("error", str(e))
                conn.send(result)


class WorldClient:
    """A replica's connection to the world process."""

    def __init__(self, address, authkey: bytes, timeout_s: float = 10.0):
        try:
            self.conn = Client(tuple(address), authkey=authkey)
        except OSError as e:
            raise WorldUnavailable(f"world at {address}: {e}") from e
        self.timeout_s = timeout_s

    def call(self, op: str, *args):
        try:
            self.conn.send((op, args))
            if not self.conn.poll(self.timeout_s):
                raise WorldUnavailable(f"world: no answer to {op} in {self.timeout_s} s")
            status, result = self.conn.recv()
        except (EOFError, OSError) as e:
            raise WorldUnavailable(f"world: {type(e).__name__}: {e}") from e
        if status == "error":
            raise WorldError(result)
        return result

    def close(self) -> None:
        self.conn.close()


class LocalWorld:
    """The same call interface on a World in this process (the reference run)."""

    def __init__(self, world: World):
        self.world = world

    def call(self, op: str, *args):
        return self.world.call(op, *args)

    def close(self) -> None:
        pass


def main(argv=None) -> int:
    """`python -m vecsched.adapters.sim.ha.world_server CONFIG_JSON`: serve a World on loopback; print its
    address as one JSON line; exit after a `shutdown` call. The authkey (hex) comes
    from the environment (VECSCHED_HA_AUTHKEY)."""
    import json
    import os
    import sys

    import faulthandler
    import signal
    faulthandler.register(signal.SIGUSR1, all_threads=True)   # stacks on demand
    argv = sys.argv[1:] if argv is None else argv
    cfg = SimConfig(**json.loads(argv[0]))
    server = WorldServer(World(cfg), bytes.fromhex(os.environ[AUTHKEY_ENV]))
    print(json.dumps({"address": list(server.address)}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
