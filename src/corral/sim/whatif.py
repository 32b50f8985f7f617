"""What-if edits of a cluster file: scale every group, add or remove GPUs of a type.

``NxTYPE`` adds N GPUs in nodes shaped like the first node group of that type (its count
grows), or, for a type the cluster file does not have, in new 8-GPU nodes (one node of N GPUs
when N < 8) priced and powered from the built-in catalogue. Removing takes whole nodes, from
the last group of that type backwards. Every error names the flag and what would be valid.
A node group keeps the cluster file's bound of ``MAX_GROUP_NODES`` nodes, and the whole cluster
has at most ``MAX_NODES`` (the bound a cluster file has too), checked before any node is built.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import ROUND_HALF_UP, Decimal

from corral.sched.describe import plural
from corral.sim.catalogue import GpuDefaults, known_types, lookup
from corral.sim.cluster import MAX_NODES
from corral.spec import ClusterSpec, NodeGroupSpec
from corral.spec.quantities import MAX_GPUS_PER_NODE
from corral.spec.wording import shown

NEW_NODE_GPUS = 8
MAX_GROUP_NODES = 100_000  # as a cluster file allows (NodeGroupSpec.count)
_MAX_AMOUNT_DIGITS = 12  # N beyond 999,999,999,999 GPUs is refused before it is read as a number
_AMOUNT_RE = re.compile(r"^\s*([0-9]+)\s*[xX×]\s*([A-Za-z0-9][A-Za-z0-9_.\-]*)\s*$")


class WhatIfError(ValueError):
    """A what-if flag that cannot apply to the cluster; the message starts with the flag and its value."""


def parse_amount(text: str, flag: str) -> tuple[int, str]:
    """``8xH100`` into (8, "H100")."""
    match = _AMOUNT_RE.match(text)
    digits = match[1].lstrip("0") if match is not None else ""
    if len(digits) > _MAX_AMOUNT_DIGITS:  # far past any cluster, and past what int() reads
        raise WhatIfError(
            f"{flag} {text}: N has {len(digits):,} digits, more GPUs than a cluster holds"
            f" ({MAX_NODES:,} nodes of at most {MAX_GPUS_PER_NODE} GPUs)"
        )
    if match is None or not digits:
        raise WhatIfError(
            f"{flag} {shown(text)}: expected NxTYPE, N GPUs (a whole number above 0) of TYPE, such as 8xH100"
        )
    return int(digits), match[2]


def apply_what_if(
    spec: ClusterSpec, scale: float = 1.0, add: Sequence[str] = (), remove: Sequence[str] = ()
) -> ClusterSpec:
    """The cluster after ``--cluster-scale``, then every ``--add``, then every ``--remove``."""
    original = spec
    if scale != 1.0:
        spec = scale_cluster(spec, scale, then_added=bool(add))
    for text in add:
        count, gpu_type = parse_amount(text, "--add")
        spec = add_gpus(spec, count, gpu_type, f"--add {text}", original)
    for text in remove:
        count, gpu_type = parse_amount(text, "--remove")
        spec = remove_gpus(spec, count, gpu_type, f"--remove {text}")
    return spec


def scale_cluster(spec: ClusterSpec, factor: float, then_added: bool = False) -> ClusterSpec:
    """Every group's node count times ``factor``, rounded to the nearest (halves up); groups at 0 go.
    With ``then_added`` (``--add`` follows) no group may be left: ``--cluster-scale 0 --add 16xH100``
    replaces the cluster."""
    flag = f"--cluster-scale {factor:g}"
    if not (factor >= 0 and math.isfinite(factor)):
        raise WhatIfError(f"{flag}: expected a finite number 0 or above, such as 0.5 or 2")
    # The factor as written (0.7, not the binary 0.6999…), so that a half is a half: 45 × 0.7 = 31.5 gives 32.
    written = Decimal(repr(factor))
    groups = []
    for group in spec.node_groups:
        count = int((group.count * written).to_integral_value(rounding=ROUND_HALF_UP))
        _check_group(f"node group {group.group_name}", count, flag)
        if count > 0:
            groups.append(group.model_copy(update={"count": count}))
    if not groups and then_added:
        return spec.model_copy(update={"node_groups": []})  # not a cluster yet: the additions make it one
    return _with_groups(spec, groups, flag)


def add_gpus(
    spec: ClusterSpec, count: int, gpu_type: str, flag: str, original: ClusterSpec | None = None
) -> ClusterSpec:
    """N more GPUs of a type: more nodes in its first group, or a new group from the catalogue. A type
    ``--cluster-scale`` took out of the cluster file (``original``) comes back shaped as its first group there."""
    same = _groups_of(spec, gpu_type)
    groups = list(spec.node_groups)
    if not same and original is not None and (former := _groups_of(original, gpu_type)):
        group = original.node_groups[former[0]]
        groups.append(group.model_copy(update={"count": 0}))  # grows below, as a group of the file would
        same = [len(groups) - 1]
    if same:
        index = same[0]
        group = groups[index]
        per_node = group.gpus_per_node
        if per_node == 0 or count % per_node:
            raise WhatIfError(
                f"{flag}: {group.gpu_type} nodes (group {group.group_name}) have {per_node} GPUs;"
                f" add a multiple of {per_node}"
            )
        _check_group(f"node group {group.group_name}", group.count + count // per_node, flag)
        groups[index] = group.model_copy(update={"count": group.count + count // per_node})
        return _with_groups(spec, groups, flag)
    defaults = lookup(gpu_type)
    if defaults is None:
        raise WhatIfError(
            f"{flag}: {gpu_type} is neither in the cluster file nor in the built-in catalogue ({known_types()});"
            " add a node group of it to the cluster file, with price_per_gpu_hour, watts_busy and watts_idle"
        )
    per_node = count if count < NEW_NODE_GPUS else NEW_NODE_GPUS
    if count % per_node:
        raise WhatIfError(
            f"{flag}: new {defaults.gpu_type} nodes have {NEW_NODE_GPUS} GPUs;"
            f" add a multiple of {NEW_NODE_GPUS}, or fewer than {NEW_NODE_GPUS} for one node"
        )
    _check_group(f"the new {defaults.gpu_type} node group", count // per_node, flag)
    groups.append(new_group(defaults, count // per_node, per_node, {g.group_name for g in groups}))
    speeds = dict(spec.gpu_speed)
    listed = next((key for key in speeds if key.lower() == defaults.gpu_type.lower()), None)
    # The file's speed for the type (its key whatever its case, spelled as the new group now), else the catalogue's.
    speeds[defaults.gpu_type] = defaults.speed if listed is None else speeds.pop(listed)
    return _with_groups(spec, groups, flag).model_copy(update={"gpu_speed": speeds})


def new_group(defaults: GpuDefaults, count: int, gpus_per_node: int, taken: set[str]) -> NodeGroupSpec:
    """A node group of a catalogue type, named after it (``h100``, else ``h100-added``, …)."""
    base = defaults.gpu_type.lower()
    name, number = base, 1
    while name in taken:
        name = f"{base}-added" if number == 1 else f"{base}-added-{number}"
        number += 1
    return NodeGroupSpec.model_validate(
        {
            "name": name,
            "count": count,
            "gpus_per_node": gpus_per_node,
            "gpu_type": defaults.gpu_type,
            "gpu_memory": f"{defaults.memory_gb}GB",
            "price_per_gpu_hour": defaults.price_per_gpu_hour,
            "watts_busy": defaults.watts_busy,
            "watts_idle": defaults.watts_idle,
        }
    )


def remove_gpus(spec: ClusterSpec, count: int, gpu_type: str, flag: str) -> ClusterSpec:
    """N fewer GPUs of a type, in whole nodes, from the last group of that type backwards."""
    same = _groups_of(spec, gpu_type)
    if not same:
        types = ", ".join(dict.fromkeys(g.gpu_type for g in spec.node_groups))
        raise WhatIfError(f"{flag}: the cluster has no {gpu_type} GPUs; its GPU types are {types}")
    groups = list(spec.node_groups)
    have = sum(groups[i].count * groups[i].gpus_per_node for i in same)
    if count > have:
        raise WhatIfError(f"{flag}: the cluster has only {plural(have, groups[same[0]].gpu_type + ' GPU')}")
    takes = _whole_nodes([(groups[i].gpus_per_node, groups[i].count) for i in same], count)
    if takes is None:
        kinds = ", ".join(f"{groups[i].count}×{groups[i].gpus_per_node}" for i in same)
        near = _nearest_whole([(groups[i].gpus_per_node, groups[i].count) for i in same], count)
        raise WhatIfError(
            f"{flag}: whole nodes are removed, and no whole {groups[same[0]].gpu_type} nodes ({kinds} GPUs)"
            f" add up to {count} GPUs; the nearest counts that do: {' and '.join(map(str, near))}"
        )
    for index, take in zip(same, takes, strict=True):
        groups[index] = groups[index].model_copy(update={"count": groups[index].count - take})
    return _with_groups(spec, [g for g in groups if g.count > 0], flag)


def _reachable(shapes: list[tuple[int, int]]) -> list[int]:
    """For each prefix of ``shapes`` ((GPUs per node, nodes), in order), the GPU counts its whole nodes can
    make, as a bit set (bit n: n GPUs): ``[0]`` first, one more per group (bounded knapsack by doubling)."""
    sets = [1]
    for size, nodes in shapes:
        bits, step, left = sets[-1], 1, nodes
        while left > 0 and size > 0:
            take = min(step, left)
            bits |= bits << (take * size)
            left -= take
            step *= 2
        sets.append(bits)
    return sets


def _whole_nodes(shapes: list[tuple[int, int]], count: int) -> list[int] | None:
    """Nodes to take from each group so that they hold exactly ``count`` GPUs, as many as can be from the
    last group, then the one before, …; None when no whole nodes make ``count``."""
    sets = _reachable(shapes)
    if not sets[-1] >> count & 1:
        return None
    takes = [0] * len(shapes)
    left = count
    for index in reversed(range(len(shapes))):
        size, nodes = shapes[index]
        take = min(nodes, left // size) if size > 0 else 0
        while take > 0 and not sets[index] >> (left - take * size) & 1:
            take -= 1
        takes[index], left = take, left - take * size
    return takes


def _nearest_whole(shapes: list[tuple[int, int]], count: int) -> list[int]:
    """The GPU counts nearest ``count`` (below and above it, where there are) that whole nodes make."""
    bits = _reachable(shapes)[-1]
    below = (bits & ((1 << count) - 1)).bit_length() - 1
    above = bits >> (count + 1)
    nearest = [below] if below > 0 else []
    if above:
        nearest.append(count + 1 + (above & -above).bit_length() - 1)
    return nearest


def _groups_of(spec: ClusterSpec, gpu_type: str) -> list[int]:
    """Indexes of the groups of a type: spelled exactly, else without regard to case."""
    exact = [i for i, g in enumerate(spec.node_groups) if g.gpu_type == gpu_type]
    return exact or [i for i, g in enumerate(spec.node_groups) if g.gpu_type.lower() == gpu_type.lower()]


def _check_group(label: str, count: int, flag: str) -> None:
    if count > MAX_GROUP_NODES:
        raise WhatIfError(f"{flag}: {label} would have {count:,} nodes; a node group has at most {MAX_GROUP_NODES:,}")


def _with_groups(spec: ClusterSpec, groups: list[NodeGroupSpec], flag: str) -> ClusterSpec:
    if not groups:
        raise WhatIfError(f"{flag}: no node would be left in the cluster")
    total = sum(g.count for g in groups)
    if total > MAX_NODES:
        raise WhatIfError(f"{flag}: the cluster would have {total:,} nodes; at most {MAX_NODES:,} can be simulated")
    return spec.model_copy(update={"node_groups": groups})
