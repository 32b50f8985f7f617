"""Accounting: GPU-seconds, cost and energy of every job, from the head's persistent records.

GPU time comes from the task rows (one per node per attempt, with when it started and when its
processes were gone); energy from the ``usage.energy`` events the meter keeps; prices from the
head's settings (``gpu_price``). Nothing is kept only in memory, so usage survives restarts.
"""

from corral.head.services.accounting.meter import meter
from corral.head.services.accounting.report import gpu_price, job_usage, usage_report, usage_series

__all__ = ["gpu_price", "job_usage", "meter", "usage_report", "usage_series"]
