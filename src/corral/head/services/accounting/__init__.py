"""Accounting: GPU-seconds, cost and energy of every job, from the head's persistent records.

GPU time comes from the task rows (one per node per attempt, with when it started and when its
processes were gone); energy from the ``usage.energy`` events the meter keeps; prices from the
prices recorded over time (``prices``: each head records its ``--gpu-prices`` when it starts, if
they changed), so a stretch of time costs what GPUs cost then. Nothing is kept only in memory, so
usage survives restarts.
"""

from corral.head.services.accounting.meter import meter
from corral.head.services.accounting.prices import price_of, record_head_prices, record_prices
from corral.head.services.accounting.report import job_usage, usage_report, usage_series

__all__ = ["job_usage", "meter", "price_of", "record_head_prices", "record_prices", "usage_report", "usage_series"]
