"""The database's write lock serves waiting writers first come, first served."""

from __future__ import annotations

import threading
import time

from corral.head.store.db import FifoLock


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_waiters_get_the_lock_in_the_order_they_asked():
    lock, order = FifoLock(), []
    lock.acquire()
    threads = []
    for i in range(6):

        def writer(i=i):
            with lock:
                order.append(i)

        thread = threading.Thread(target=writer)
        thread.start()
        threads.append(thread)
        _wait_until(lambda i=i: len(lock._waiters) == i + 1)
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4, 5]


def test_the_releasing_thread_cannot_jump_the_queue():
    lock, order = FifoLock(), []
    lock.acquire()

    def waiter():
        with lock:
            order.append("waiter")

    thread = threading.Thread(target=waiter)
    thread.start()
    _wait_until(lambda: len(lock._waiters) == 1)
    lock.release()
    with lock:  # asked after the waiter: gets it after the waiter
        order.append("releaser")
    thread.join(5)
    assert order == ["waiter", "releaser"]


def test_many_threads_never_hold_it_together():
    lock, inside, most = FifoLock(), [0], [0]

    def worker():
        for _ in range(200):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert most[0] == 1 and not lock._held
