"""Name rules shared by user input and the wire: user names and GPU type names.

A user name is what `corral user add` accepts and a token acts as; the cluster config's `members`
list them, so both take the same names. A GPU type name is what a job's `gpu_type`, a fake GPU
inventory and a simulated cluster's node groups take; the cluster config's quotas and speeds are keyed
by such names.
"""

from __future__ import annotations

import re

USER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$"
USER_NAME_RULE = "1-64 characters: letters, digits, '_', '.', '@' and '-', starting with a letter or digit"
LABEL_PATTERN = r"^[^\x00-\x1f]*$"
LABEL_RULE = "text without control characters (such as a newline or a tab)"
GPU_TYPE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
GPU_TYPE_RULE = "a type name is letters, digits, '_', '.' and '-', starting with a letter or digit, such as H100"


def is_user_name(value: str) -> bool:
    """Whether ``value`` is a name a user can have."""
    return re.fullmatch(USER_NAME_PATTERN, value) is not None


def is_gpu_type(value: str) -> bool:
    """Whether ``value`` is a name a GPU type can have (such as H100 or H100-1g.10gb)."""
    return GPU_TYPE_RE.fullmatch(value) is not None
