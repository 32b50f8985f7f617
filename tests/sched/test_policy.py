import pytest

from corral.model import Job, Request
from corral.sched import POLICIES, get_policy


def test_registry_names_every_policy() -> None:
    assert sorted(POLICIES) == ["default", "fifo", "priority", "srpt-oracle", "tiresias"]
    assert all(name == policy.name for name, policy in POLICIES.items())


@pytest.mark.parametrize("name", ["default", "fifo", "priority", "tiresias", "srpt-oracle"])
def test_get_policy(name: str) -> None:
    assert get_policy(name) is POLICIES[name]


def test_unknown_policy_lists_the_valid_names() -> None:
    with pytest.raises(
        ValueError,
        match=r"unknown scheduling policy 'fair'; valid policies: default, fifo, priority, srpt-oracle, tiresias",
    ):
        get_policy("fair")


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        POLICIES["mine"] = get_policy("fifo")  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("default", ["urgent", "old", "new"], id="default: priority, then submit order"),
        pytest.param("fifo", ["old", "urgent", "new"], id="fifo: submit order only"),
    ],
)
def test_job_order(name: str, expected: list[str]) -> None:
    jobs = [
        Job(id="new", seq=3, request=Request()),
        Job(id="urgent", seq=2, request=Request(), priority=7),
        Job(id="old", seq=1, request=Request()),
    ]
    assert [j.id for j in sorted(jobs, key=get_policy(name).job_order)] == expected
