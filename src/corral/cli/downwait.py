"""How long `corral down` waits for the agents: each stops its tasks first, with their grace periods."""

from __future__ import annotations

import click

from corral.client.calls import HeadApi
from corral.client.errors import CorralError
from corral.client.light import LightTransport

AGENT_STOP_TIMEOUT_S = 60.0  # enough for tasks with the default grace periods (10 s to cancel, 30 s to preempt)
DEFAULT_GRACE_S = 30.0  # for a job without a grace period of its own: the head's --grace (10 s by default), with room
MARGIN_S = 30.0  # past the longest grace period: SIGKILL, the report to the head, the agent's own exit


def agents_stop_within(url: str, token: str) -> float:
    """``AGENT_STOP_TIMEOUT_S``, or longer when a running job's grace period asks for it (a job may wait
    up to a day between SIGTERM and SIGKILL); said on stderr when it is longer. The head is asked which
    jobs run; when it cannot say, the default."""
    try:
        running = HeadApi(LightTransport(url, token)).jobs(states=["RUNNING"])
    except CorralError:
        return AGENT_STOP_TIMEOUT_S
    graces = [job.get("grace_period_s") for job in running if isinstance(job, dict)]
    longest = max((g if isinstance(g, int | float) else DEFAULT_GRACE_S for g in graces), default=0.0)
    if longest + MARGIN_S <= AGENT_STOP_TIMEOUT_S:
        return AGENT_STOP_TIMEOUT_S
    click.echo(
        f"corral down: waiting up to {longest + MARGIN_S:g} s for running jobs to stop (their grace periods, up to"
        f" {longest:g} s, and {MARGIN_S:g} s for the agents to report and exit)",
        err=True,
    )
    return longest + MARGIN_S
