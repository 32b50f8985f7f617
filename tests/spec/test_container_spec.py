from pathlib import Path

import pytest

from corral.spec import SpecError, load_job_yaml, parse_job_spec
from corral.spec.containers import Volume, parse_volume
from corral.spec.service import parse_service_spec


def errors_of(data, parse=parse_job_spec) -> dict[str, str]:
    with pytest.raises(SpecError) as info:
        parse(data)
    return {e.field: e.message for e in info.value.errors}


def test_a_job_file_with_an_image_and_volumes_parses():
    spec = load_job_yaml(
        "command: python train.py\n"
        "image: nvcr.io/nvidia/pytorch:24.05-py3\n"
        "volumes: [/data:/data:ro, /scratch/run1:/out, /ckpt:/ckpt:rw]\n"
    )
    assert spec.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert spec.mounts == [
        Volume("/data", "/data", read_only=True),
        Volume("/scratch/run1", "/out"),
        Volume("/ckpt", "/ckpt"),
    ]


def test_without_an_image_a_job_runs_bare():
    spec = parse_job_spec({"command": "true"})
    assert spec.image is None
    assert spec.volumes == []


@pytest.mark.parametrize("image", ["busybox", "/images/pytorch.sif", "docker://ubuntu:24.04", "reg.io/a/b@sha256:ab12"])
def test_image_references_and_paths_are_accepted(image):
    assert parse_job_spec({"command": "true", "image": image}).image == image


@pytest.mark.parametrize("image", ["", "two words", "--privileged", "-v=/:/host"])
def test_bad_images_name_the_field(image):
    errors = errors_of({"command": "true", "image": image})
    assert list(errors) == ["image"]
    assert "bad image" in errors["image"]


def test_volumes_without_an_image_are_refused_naming_volumes():
    errors = errors_of({"command": "true", "volumes": ["/data:/data"]})
    assert list(errors) == ["volumes"]
    assert "give image too" in errors["volumes"]


def test_a_refused_image_does_not_also_blame_the_volumes():
    assert list(errors_of({"command": "true", "image": "-x", "volumes": ["/data:/data"]})) == ["image"]


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ("data:/data", "host path must be absolute"),
        ("/data:data", "container path must be absolute"),
        ("/data:/data:rx", "mode must be ro (read-only) or rw"),
        ("/data", "expected HOST:CONTAINER"),
        ("/a:/b:ro:x", "expected HOST:CONTAINER"),
        ("/a,b:/b", "must not contain a comma"),
    ],
)
def test_bad_volumes_name_their_index_and_what_is_valid(volume, words):
    errors = errors_of({"command": "true", "image": "busybox", "volumes": ["/ok:/ok", volume]})
    assert list(errors) == ["volumes[1]"]
    assert words in errors["volumes[1]"]


def test_volumes_must_be_a_list():
    errors = errors_of({"command": "true", "image": "busybox", "volumes": "/data:/data"})
    assert "must be a list of HOST:CONTAINER" in errors["volumes"]


def test_volume_paths_are_normalised():
    assert parse_volume("/data/./sets/:/in//x:ro") == Volume("/data/sets", "/in/x", read_only=True)


def test_a_service_runs_its_replicas_in_its_image():
    spec = parse_service_spec({"name": "web", "command": "serve", "image": "busybox", "volumes": ["/m:/m:ro"]})
    replica = spec.replica_job(1)
    assert (replica.image, replica.volumes) == ("busybox", ["/m:/m:ro"])


def test_a_service_with_volumes_and_no_image_is_refused():
    errors = errors_of({"name": "web", "command": "serve", "volumes": ["/m:/m"]}, parse_service_spec)
    assert "give image too" in errors["volumes"]


def test_the_container_example_parses():
    example = Path(__file__).resolve().parents[2] / "examples" / "container.yaml"
    spec = load_job_yaml(example.read_text())
    assert spec.image and spec.nodes == 2
    assert spec.mounts == [Volume("/data", "/data", read_only=True)]
