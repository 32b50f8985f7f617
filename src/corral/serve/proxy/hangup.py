"""Stop working for a client that has gone.

An ASGI server such as uvicorn does not cancel the application when the client disconnects; it
answers ``http.disconnect`` to the next ``receive()``, which (once the request body is read) waits
for exactly that. ``unless_gone`` watches for it while the gateway holds the request for a
replica, waits for the replica's answer or streams it, and cancels that work at once: the request
to the replica is closed, and the counters the autoscaler and the drain read drop with it.

Most requests are over in a few milliseconds, so the watch starts ``WATCH_AFTER_S`` into the work
(a timer costs far less than the task a watch needs); a client gone before then is seen as soon
as it starts. A server that cancels the application itself when its client disconnects (the
gateway's aiohttp server) says so with the scope extension ``CANCELS_ON_DISCONNECT``, and needs
no watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from corral.serve.proxy.relay import Receive

WATCH_AFTER_S = 0.05
CANCELS_ON_DISCONNECT = "corral.cancels_on_disconnect"


async def unless_gone(work: Coroutine[Any, Any, None], receive: Receive) -> bool:
    """Await ``work``, cancelling it if the client disconnects first; whether the client went away.
    Only for after the request body has been read whole."""
    task = asyncio.current_task()
    assert task is not None
    watch = _HangupWatch(receive, task)
    try:
        await work
    except asyncio.CancelledError:
        if watch.cancelled_work and task.uncancel() == 0:
            return True
        raise  # cancelled from outside (the server shutting down, or cancelling on a disconnect itself)
    finally:
        watch.stop()
    if watch.cancelled_work:  # the work ended anyway, having swallowed the cancellation
        task.uncancel()
    return False


class _HangupWatch:
    def __init__(self, receive: Receive, task: asyncio.Task[Any]) -> None:
        self.receive = receive
        self.task = task
        self.cancelled_work = False
        self.watcher: asyncio.Task[None] | None = None
        self.timer = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._start)

    def _start(self) -> None:
        self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        try:
            while (await self.receive())["type"] != "http.disconnect":
                pass
        except Exception:  # a server that cannot say: the work runs to its end
            return
        self.cancelled_work = True
        self.task.cancel()

    def stop(self) -> None:
        self.timer.cancel()
        if self.watcher is not None:
            self.watcher.cancel()
