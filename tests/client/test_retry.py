"""A keyed submission is sent again while the head is unreachable or failing, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from corral.client.calls import Call
from corral.client.errors import CorralError, InvalidRequest, NothingListening, Unreachable
from corral.client.retry import send_repeatable


class Scripted:
    """A transport that answers from a script: an exception to raise or a value to return."""

    def __init__(self, *outcomes: Any, answered: bool = True) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[Call] = []
        self.answered = answered  # as the real transports say: a head answered through it before

    def send(self, call: Call) -> Any:
        self.sent.append(call)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def stream(self, call: Call) -> Iterator[bytes]:
        raise NotImplementedError


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


CALL = Call("POST", "/v1/jobs", json={"command": "x"}, headers={"Idempotency-Key": "k"})


def test_the_same_request_is_sent_until_the_head_answers():
    transport = Scripted(Unreachable("down"), CorralError("boom", 503), {"id": "j1"})
    time = FakeTime()
    assert send_repeatable(transport, CALL, sleep=time.sleep, clock=lambda: time.now) == {"id": "j1"}
    assert transport.sent == [CALL, CALL, CALL]
    assert time.pauses == [0.1, 0.2]


def test_a_refusal_is_not_repeated():
    transport = Scripted(InvalidRequest("resources.gpus: must be ≥ 0", 422))
    with pytest.raises(InvalidRequest):
        send_repeatable(transport, CALL, sleep=FakeTime().sleep)
    assert len(transport.sent) == 1


def test_it_gives_up_after_its_time_with_the_last_error():
    transport = Scripted(*[Unreachable(f"down {i}") for i in range(100)])
    time = FakeTime()
    with pytest.raises(Unreachable):
        send_repeatable(transport, CALL, retry_for_s=10.0, sleep=time.sleep, clock=lambda: time.now)
    assert time.pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]  # the next pause would end past 10 s
    assert len(transport.sent) == 9


def test_where_nothing_listens_and_no_head_ever_answered_it_gives_up_at_once():
    transport = Scripted(NothingListening("refused"), {"id": "j1"}, answered=False)
    time = FakeTime()
    with pytest.raises(NothingListening):
        send_repeatable(transport, CALL, sleep=time.sleep, clock=lambda: time.now)
    assert len(transport.sent) == 1 and time.pauses == []


def test_a_head_that_answered_before_is_waited_for_while_it_restarts():
    transport = Scripted(NothingListening("refused"), NothingListening("refused"), {"id": "j1"}, answered=True)
    time = FakeTime()
    assert send_repeatable(transport, CALL, sleep=time.sleep, clock=lambda: time.now) == {"id": "j1"}
    assert len(transport.sent) == 3


def test_a_request_that_may_have_reached_a_head_is_sent_again_even_before_any_answer():
    transport = Scripted(Unreachable("connection reset"), {"id": "j1"}, answered=False)
    time = FakeTime()
    assert send_repeatable(transport, CALL, sleep=time.sleep, clock=lambda: time.now) == {"id": "j1"}
    assert len(transport.sent) == 2
