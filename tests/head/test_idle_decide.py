"""The pure idle-GPU decision: readings and time in, flag / clear / cancel out."""

from datetime import UTC, datetime, timedelta

from corral.head.services.idle import IdlePolicy, JobGpus, Mark, Utilization, decide, idle_since

T0 = datetime(2025, 1, 1, tzinfo=UTC)
GPUS = (("n1", 0), ("n1", 1))


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def series(*points: tuple[float, float]) -> list[Utilization]:
    return [Utilization(at(s), p) for s, p in points]


def job(mark=None, held=0.0):
    return JobGpus("j-1", 0, at(held), GPUS, mark)


POLICY = IdlePolicy(after_s=600)


def test_idle_since_is_the_start_of_the_newest_quiet_run():
    assert idle_since(series((0, 90), (10, 2), (20, 4.9)), 5.0) == at(10)
    assert idle_since(series((0, 1), (10, 2)), 5.0) == at(0)
    assert idle_since(series((0, 1), (10, 50)), 5.0) is None
    assert idle_since([], 5.0) is None


def test_a_job_is_flagged_once_every_gpu_was_quiet_long_enough():
    quiet = {GPUS[0]: series((0, 0), (300, 1), (600, 2)), GPUS[1]: series((0, 3), (600, 0))}
    assert decide([job()], quiet, at(599), POLICY) == []
    [flag] = decide([job()], quiet, at(600), POLICY)
    assert (flag.action, flag.gpus, flag.idle_since, flag.cancel_at) == ("flag", 2, at(0), None)


def test_one_busy_gpu_keeps_the_job_unflagged():
    readings = {GPUS[0]: series((0, 0), (600, 0)), GPUS[1]: series((0, 0), (590, 40), (600, 0))}
    assert decide([job()], readings, at(900), POLICY) == []  # quiet only since 600
    assert decide([job()], readings, at(1200), POLICY)[0].idle_since == at(600)


def test_idle_time_counts_from_when_the_job_got_its_gpus():
    quiet = {gpu: series((0, 0), (1000, 0)) for gpu in GPUS}
    assert decide([job(held=900)], quiet, at(1400), POLICY) == []
    assert decide([job(held=900)], quiet, at(1500), POLICY)[0].action == "flag"


def test_gpus_without_readings_are_not_judged():
    assert decide([job()], {GPUS[0]: series((0, 0))}, at(5000), POLICY) == []


def test_cancel_policy_sets_a_deadline_after_the_grace():
    policy = IdlePolicy(after_s=600, action="cancel", grace_s=300)
    quiet = {gpu: series((0, 0), (600, 0)) for gpu in GPUS}
    [flag] = decide([job()], quiet, at(700), policy)
    assert flag.cancel_at == at(1000)


def test_a_flagged_job_is_cleared_when_a_gpu_gets_busy_and_cancelled_when_the_deadline_passes():
    warned = Mark(flagged_at=at(700), cancel_at=at(1000))
    quiet = {gpu: series((0, 0), (900, 0)) for gpu in GPUS}
    assert decide([job(warned)], quiet, at(999), POLICY) == []
    [cancel] = decide([job(warned)], quiet, at(1000), POLICY)
    assert cancel.action == "cancel"
    busy = {GPUS[0]: series((0, 0), (800, 60)), GPUS[1]: series((0, 0))}
    assert [d.action for d in decide([job(warned)], busy, at(1000), POLICY)] == ["clear"]
    before = {GPUS[0]: series((0, 60), (700, 0)), GPUS[1]: series((0, 0))}  # busy only before the flag
    assert [d.action for d in decide([job(warned)], before, at(1000), POLICY)] == ["cancel"]


def test_a_flag_without_deadline_stays_until_busy():
    flagged = Mark(flagged_at=at(700))
    quiet = {gpu: series((0, 0), (5000, 0)) for gpu in GPUS}
    assert decide([job(flagged)], quiet, at(10_000), POLICY) == []
