"""The argv each container runtime gets for a rank (pure: no runtime needs to be installed)."""

import pytest

from corral.agent.containers import NO_RUNTIME, ContainerTask, find_runtime
from corral.agent.containers.hpc import Apptainer, Enroot
from corral.agent.containers.oci import Docker, Podman
from corral.agent.gpus import HostDevice
from corral.spec.containers import Volume

ENV = {"CUDA_VISIBLE_DEVICES": "2,3", "RANK": "0", "CORRAL_JOB_ID": "j-1"}


def task(**changes) -> ContainerTask:
    fields = {
        "name": "corral-j-1-1-0-r0",
        "image": "reg.io/train:1",
        "command": "python train.py",
        "env": ENV,
        "workdir": "/work/task",
        "mounts": (Volume("/data", "/data", read_only=True), Volume("/out", "/results")),
        "gpus": (2, 3),
        "real_gpus": True,
        "node": "gpu-07",
    }
    return ContainerTask(**(fields | changes))


def pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == flag]


def test_podman_runs_the_rank_on_the_host_network_with_cdi_devices():
    run = Podman().run(task())
    argv = run.argv
    assert argv[:5] == ["podman", "run", "--rm", "--replace", "--name"]
    assert pairs(argv, "--name") == ["corral-j-1-1-0-r0"]
    assert pairs(argv, "--network") == ["host"]
    assert pairs(argv, "--label") == ["corral.task=corral-j-1-1-0-r0", "corral.node=gpu-07"]
    assert "--init" in argv  # SIGTERM reaches the command, not an init that ignores it
    assert pairs(argv, "--device") == ["nvidia.com/gpu=2", "nvidia.com/gpu=3"]
    assert pairs(argv, "-v") == ["/work/task:/work/task", "/data:/data:ro", "/out:/results:rw"]
    assert pairs(argv, "-w") == ["/work/task"]
    assert argv[-4:] == ["reg.io/train:1", "/bin/sh", "-c", "python train.py"]


def test_variables_go_by_name_and_their_values_through_the_environment():
    run = Podman().run(task())
    assert sorted(pairs(run.argv, "-e")) == sorted(ENV)
    assert not any("=" in name for name in pairs(run.argv, "-e"))
    assert run.env["RANK"] == "0"


def test_real_gpus_are_renumbered_from_zero_inside_the_container():
    assert Podman().run(task()).env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert Docker().run(task()).env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert Enroot().run(task()).env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_fake_gpus_pass_no_device_and_keep_the_host_indices():
    for runtime in (Podman(), Docker(), Enroot()):
        run = runtime.run(task(real_gpus=False))
        assert run.env["CUDA_VISIBLE_DEVICES"] == "2,3"
        assert "--device" not in run.argv and "--gpus" not in run.argv
        assert "NVIDIA_VISIBLE_DEVICES" not in run.env
    assert "--nv" not in Apptainer().run(task(real_gpus=False)).argv


def test_an_argv_command_is_run_without_a_shell():
    assert Podman().run(task(command=["python", "-c", "print(1)"])).argv[-4:] == [
        "reg.io/train:1",
        "python",
        "-c",
        "print(1)",
    ]


def test_docker_passes_gpus_with_its_own_quoting_and_names_them_for_the_toolkit():
    run = Docker().run(task())
    assert run.env["NVIDIA_VISIBLE_DEVICES"] == "2,3"  # over the image's "all"
    assert "NVIDIA_VISIBLE_DEVICES" in pairs(run.argv, "-e")
    argv = run.argv
    assert argv[:3] == ["docker", "run", "--rm"]
    assert "--replace" not in argv
    assert pairs(argv, "--gpus") == ['"device=2,3"']
    assert pairs(argv, "--network") == ["host"]


# Slot 5 of a node with MIG on: MIG device 2 of GPU 1 (NVML's numbers, not the slot's).
MIG = HostDevice(gpu=1, mig=2, uuid="MIG-5f3c")
MIG_ENV = {**ENV, "CUDA_VISIBLE_DEVICES": "MIG-5f3c"}  # as the agent names the slot for a bare rank


def mig_task(**changes) -> ContainerTask:
    return task(**({"gpus": (5,), "devices": (MIG,), "env": MIG_ENV} | changes))


def test_podman_passes_a_mig_slot_by_its_cdi_uuid_name():
    run = Podman().run(mig_task())
    assert pairs(run.argv, "--device") == ["nvidia.com/gpu=MIG-5f3c"]
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-5f3c"  # exactly its slot, whatever CUDA numbers it inside


def test_docker_passes_a_mig_slot_by_uuid_to_the_toolkit():
    run = Docker().run(mig_task())
    assert pairs(run.argv, "--gpus") == ['"device=MIG-5f3c"']
    assert run.env["NVIDIA_VISIBLE_DEVICES"] == "MIG-5f3c"
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-5f3c"


def test_apptainer_names_a_mig_slot_by_uuid_for_cuda():
    run = Apptainer().run(mig_task(env=ENV))  # even where the job's variables name the slot's index
    assert "--nv" in run.argv
    assert run.env["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == "MIG-5f3c"


def test_enroot_names_a_mig_slot_by_uuid_for_its_hook_and_for_cuda():
    run = Enroot().run(mig_task())
    assert run.env["NVIDIA_VISIBLE_DEVICES"] == "MIG-5f3c"
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-5f3c"
    assert {"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"} <= set(pairs(run.argv, "--env"))


def test_several_mig_slots_go_by_uuid_in_order():
    devices = (MIG, HostDevice(gpu=0, mig=0, uuid="MIG-0a0a"))
    run = Podman().run(task(gpus=(5, 0), devices=devices))
    assert pairs(run.argv, "--device") == ["nvidia.com/gpu=MIG-5f3c", "nvidia.com/gpu=MIG-0a0a"]
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-5f3c,MIG-0a0a"


def test_whole_gpus_go_by_their_nvml_index_where_it_differs_from_the_slot():
    whole = task(gpus=(7,), devices=(HostDevice(gpu=2, uuid="GPU-77"),))  # slot 7: a known host device
    assert pairs(Podman().run(whole).argv, "--device") == ["nvidia.com/gpu=2"]
    assert pairs(Docker().run(whole).argv, "--gpus") == ['"device=2"']
    assert Enroot().run(whole).env["NVIDIA_VISIBLE_DEVICES"] == "2"
    assert Podman().run(whole).env["CUDA_VISIBLE_DEVICES"] == "0"


def test_on_a_node_with_mig_on_whole_gpus_go_by_uuid():
    whole = task(gpus=(7,), devices=(HostDevice(gpu=2, uuid="GPU-77"),), by_uuid=True)
    assert pairs(Podman().run(whole).argv, "--device") == ["nvidia.com/gpu=GPU-77"]
    assert pairs(Docker().run(whole).argv, "--gpus") == ['"device=GPU-77"']
    assert Enroot().run(whole).env["NVIDIA_VISIBLE_DEVICES"] == "GPU-77"
    assert Podman().run(whole).env["CUDA_VISIBLE_DEVICES"] == "0"


def test_fake_mig_slots_pass_no_device():
    run = Podman().run(mig_task(real_gpus=False))
    assert "--device" not in run.argv
    assert run.env["CUDA_VISIBLE_DEVICES"] == "MIG-5f3c"  # the job's own variables, unchanged


def test_podman_and_docker_containers_are_removed_by_name():
    assert Podman().remove("c1") == ["podman", "rm", "-f", "--ignore", "--time", "0", "c1"]
    assert Docker().remove("c1") == ["docker", "rm", "-f", "c1"]


def test_apptainer_binds_cleans_the_environment_and_keeps_host_gpu_indices():
    run = Apptainer().run(task())
    argv = run.argv
    assert argv[:4] == ["apptainer", "exec", "--cleanenv", "--nv"]
    assert pairs(argv, "--bind") == ["/work/task:/work/task", "/data:/data:ro", "/out:/results:rw"]
    assert pairs(argv, "--pwd") == ["/work/task"]
    assert run.env["APPTAINERENV_CUDA_VISIBLE_DEVICES"] == "2,3"  # --nv binds all GPUs: host indices
    assert run.env["APPTAINERENV_RANK"] == "0"
    assert argv[-4:] == ["reg.io/train:1", "/bin/sh", "-c", "python train.py"]


def test_enroot_mounts_names_the_gpus_for_its_hook_and_changes_into_the_workdir():
    run = Enroot().run(task(image="/images/train.sqsh"))
    argv = run.argv
    assert argv[:3] == ["enroot", "start", "--rw"]
    assert pairs(argv, "--mount") == [
        "/work/task:/work/task:none:x-create=dir,bind,rw",
        "/data:/data:none:x-create=dir,bind,ro",
        "/out:/results:none:x-create=dir,bind,rw",
    ]
    assert "NVIDIA_VISIBLE_DEVICES" in pairs(argv, "--env")
    assert run.env["NVIDIA_VISIBLE_DEVICES"] == "2,3"
    image_at = argv.index("/images/train.sqsh")
    assert argv[image_at + 1 : image_at + 4] == ["/bin/sh", "-c", 'cd "$0" && exec "$@"']
    assert argv[image_at + 4 :] == ["/work/task", "/bin/sh", "-c", "python train.py"]


def test_the_containers_of_a_node_are_listed_by_its_label():
    assert Podman().list_node("gpu-07") == [
        "podman",
        "ps",
        "-a",
        "--filter",
        "label=corral.node=gpu-07",
        "--format",
        "{{.Names}}",
    ]
    assert Docker().list_node("gpu-07")[:2] == ["docker", "ps"]


def test_daemonless_runtimes_leave_nothing_to_list_or_remove():
    for runtime in (Apptainer(), Enroot()):
        assert runtime.remove("c1") is None
        assert runtime.list_node("gpu-07") is None


def answers(runtime) -> None:
    return None


def test_the_first_runtime_on_path_that_answers_is_found():
    on_path = {"apptainer", "podman"}
    found = find_runtime(None, which=lambda name: f"/usr/bin/{name}" if name in on_path else None, problem=answers)
    assert isinstance(found.runtime, Podman)
    assert find_runtime(None, which=lambda name: None, problem=answers).runtime is None


def test_a_runtime_that_does_not_answer_is_passed_over_with_the_reason():
    def docker_has_no_daemon(runtime):
        return "cannot connect to the Docker daemon" if runtime.name == "docker" else None

    found = find_runtime(None, which=lambda name: f"/usr/bin/{name}", problem=docker_has_no_daemon)
    assert isinstance(found.runtime, Podman)
    assert found.passed_over == {"docker": "cannot connect to the Docker daemon"}


def test_the_runtime_asked_for_must_be_installed_and_answer():
    assert isinstance(find_runtime("enroot", which=lambda name: "/usr/bin/enroot", problem=answers).runtime, Enroot)
    with pytest.raises(ValueError, match="docker is not on PATH"):
        find_runtime("docker", which=lambda name: None, problem=answers)
    with pytest.raises(ValueError, match="docker does not work here: no daemon"):
        find_runtime("docker", which=lambda name: "/usr/bin/docker", problem=lambda runtime: "no daemon")
    with pytest.raises(ValueError, match="expected one of docker, podman, apptainer, enroot, none"):
        find_runtime("lxc", which=lambda name: "/usr/bin/lxc", problem=answers)
    assert find_runtime(NO_RUNTIME, which=lambda name: "/usr/bin/x", problem=answers).runtime is None


def test_each_runtime_is_probed_with_a_command_that_needs_it_working():
    assert Docker().probe() == ["docker", "info", "--format", "{{.ServerVersion}}"]
    assert Podman().probe() == ["podman", "info", "--format", "{{.Version.Version}}"]
    assert Apptainer().probe() == ["apptainer", "--version"]
    assert Enroot().probe() == ["enroot", "version"]


def test_docker_saying_there_is_no_such_container_means_it_is_gone():
    assert Docker().already_gone("Error response from daemon: No such container: c1")
    assert not Docker().already_gone("Error response from daemon: cannot remove: device busy")
    assert not Podman().already_gone("No such container")  # podman rm --ignore succeeds instead
