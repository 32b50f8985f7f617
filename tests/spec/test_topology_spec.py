"""The job file's topology key."""

from __future__ import annotations

import pytest

from corral.head.services.convert import request_of
from corral.spec import SpecError, parse_job_spec


def test_gangs_pack_by_rack_unless_told_otherwise():
    request = request_of(parse_job_spec({"command": "x", "nodes": 2}))
    assert (request.topology, request.topology_required) == ("rack", False)
    request = request_of(parse_job_spec({"command": "x", "nodes": 2, "topology": {"required": "block"}}))
    assert (request.topology, request.topology_required) == ("block", True)
    request = request_of(parse_job_spec({"command": "x", "nodes": 2, "topology": {"pack": "nvlink"}}))
    assert (request.topology, request.topology_required) == ("nvlink", False)


@pytest.mark.parametrize(
    ("topology", "field", "message"),
    [
        ({"pack": "rack", "required": "rack"}, "topology", "give pack or required, not both"),
        ({"pack": "rack name"}, "topology.pack", "bad label name"),
        ({"spread": "rack"}, "topology.spread", "unknown field"),
    ],
)
def test_bad_topology_names_the_field(topology, field, message):
    with pytest.raises(SpecError) as caught:
        parse_job_spec({"command": "x", "topology": topology})
    problems = {e.field: e.message for e in caught.value.errors}
    assert field in problems, problems
    assert message in problems[field]
