"""How long an agent waits before registering again after the head dropped its node."""

from corral.agent.agent import KEPT_FOR_S, REGISTER_AGAIN_MAX_S, register_again_after


def test_a_node_kept_a_while_registers_again_at_once():
    assert register_again_after(KEPT_FOR_S, 0.0) == 0.0
    assert register_again_after(3600.0, 16.0) == 0.0  # a long stay forgets the earlier waits


def test_a_node_dropped_soon_after_registering_waits_longer_each_time_up_to_a_bound():
    delays, delay = [], 0.0
    for _ in range(8):
        delay = register_again_after(0.5, delay)
        delays.append(delay)
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, REGISTER_AGAIN_MAX_S, REGISTER_AGAIN_MAX_S, REGISTER_AGAIN_MAX_S]
