import pytest

from corral.spec import GpuGroup, parse_duration_s, parse_env_pair, parse_gpu_groups, parse_labels, parse_memory_mb


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("512MB", 512),
        ("512M", 512),
        ("512mib", 512),
        ("64GB", 64 * 1024),
        ("64 GB", 64 * 1024),
        ("64g", 64 * 1024),
        ("80GiB", 80 * 1024),
        ("64Gi", 64 * 1024),  # as Kubernetes writes sizes
        ("512Mi", 512),
        ("2Ti", 2 * 1024 * 1024),
        ("2048Ki", 2),
        ("1.5TB", 1536 * 1024),
        ("1t", 1024 * 1024),
        ("2048KB", 2),
        ("1024", 1024),  # a bare number is MiB
        (" 16GB ", 16 * 1024),
        (1024, 1024),
        (0, 0),
    ],
)
def test_memory_sizes_are_binary_mebibytes(text, mb):
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("lots", "expected a size such as 512MB, 64GB, 64Gi or 1.5TB"),
        ("", "expected a size such as"),
        ("-5GB", "expected a size such as"),
        ("GB", "expected a size such as"),
        ("10XB", "unknown unit 'XB'"),
        ("3 parsecs", "unknown unit 'parsecs'"),
        (-1, "must not be negative"),
        (True, "expected a size such as"),
        ("1.5", "a number without a unit is MiB and must be whole"),
        (1.5, "a number without a unit is MiB and must be whole"),
    ],
)
def test_bad_memory_sizes_say_what_is_valid(value, expected):
    with pytest.raises(ValueError) as info:
        parse_memory_mb(value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1d2h3m4s", 86400 + 7200 + 180 + 4),
        ("1.5h", 5400),
        ("90", 90),
        ("2.5", 2.5),
        ("01:30:00", 5400),
        ("1:30", 90),  # MM:SS
        ("45", 45),
        ("  2H ", 7200),
        (90, 90),
        (0.5, 0.5),
    ],
)
def test_durations(text, seconds):
    assert parse_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("soon", "expected a duration such as 90s, 30m, 2h, 1d, 1h30m or HH:MM:SS, got 'soon'"),
        ("", "expected a duration such as"),
        ("2x", "expected a duration such as"),
        ("h", "expected a duration such as"),
        ("1h30", "expected a duration such as"),
        ("1h 30m", "expected a duration such as"),
        ("1:2:3:4", "expected a duration such as"),
        ("1:xx", "expected a duration such as"),
        ("\u0663h", "expected a duration such as"),  # an Arabic-Indic three is not an ASCII digit
        ("1:\u00b2", "expected a duration such as"),  # nor is a superscript two
        ("0", "must be positive"),
        ("0s", "must be positive"),
        ("00:00:00", "must be positive"),
        (0, "must be positive"),
        (-5, "must be positive"),
        (True, "expected a duration such as"),
    ],
)
def test_bad_durations_say_what_is_valid(value, expected):
    with pytest.raises(ValueError) as info:
        parse_duration_s(value)
    assert expected in str(info.value)


def test_fake_gpu_inventory_single_group():
    assert parse_gpu_groups("8xH100:80GB") == [GpuGroup(count=8, gpu_type="H100", memory_mb=80 * 1024)]


def test_fake_gpu_inventory_several_groups_keep_their_order():
    assert parse_gpu_groups("4xA100:40GB, 2xL4:24GB") == [
        GpuGroup(4, "A100", 40 * 1024),
        GpuGroup(2, "L4", 24 * 1024),
    ]


def test_fake_gpu_memory_defaults_to_80gb():
    assert parse_gpu_groups("2xL4") == [GpuGroup(2, "L4", 80 * 1024)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("H100", "bad GPU group 'H100': expected comma-separated COUNTxTYPE[:MEMORY] groups such as 8xH100:80GB"),
        ("8*H100", "bad GPU group '8*H100'"),
        ("", "bad GPU group ''"),
        ("8xH100,", "bad GPU group ''"),
        ("xH100", "bad GPU group 'xH100'"),
        ("0xH100", "count must be at least 1"),
        ("8xH100:lots", "bad GPU group '8xH100:lots': expected a size such as 512MB"),
    ],
)
def test_bad_fake_gpu_inventories_say_what_is_valid(value, expected):
    with pytest.raises(ValueError) as info:
        parse_gpu_groups(value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("rack=r1,nvlink=nv0", {"rack": "r1", "nvlink": "nv0"}),
        (" rack = r1 ", {"rack": "r1"}),
        ("", {}),
        ("  ", {}),
        ("zone=eu-west.1_b", {"zone": "eu-west.1_b"}),
        (f"long={'v' * 63}", {"long": "v" * 63}),
    ],
)
def test_labels(text, labels):
    assert parse_labels(text) == labels


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("rack=r1,", "entry 2 of 2 in 'rack=r1,'"),
        (" rack = r1 , ", "entry 2 of 2 in ' rack = r1 , '"),
        (",rack=r1", "entry 1 of 2 in ',rack=r1'"),
        ("rack=r1,,nvlink=nv0", "entry 2 of 3 in 'rack=r1,,nvlink=nv0'"),
    ],
)
def test_an_empty_label_entry_is_refused_naming_it(text, where):
    """As --gpu-prices refuses one: a trailing comma is a slip (a label left out?), not nothing."""
    with pytest.raises(ValueError) as refused:
        parse_labels(text)
    assert str(refused.value) == (
        f"expected key=value pairs such as rack=r1,nvlink=nv0, got an empty entry ({where}): remove the extra comma"
    )


@pytest.mark.parametrize("text", ["zone=", "zone= ", "rack=r1,zone="])
def test_a_label_without_a_value_is_refused(text):
    with pytest.raises(ValueError, match=r"label 'zone' has no value: give zone=VALUE, where a value holds letters"):
        parse_labels(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("rack=r 1", "r 1"),
        ("rack=r\t1", "r\t1"),
        ("rack=r\x001", "r\x001"),
        ("rack=a=b", "a=b"),
        ("rack=r/1", "r/1"),
        ("rack=-r1", "-r1"),
        ("rack=r1.", "r1."),
        ("rack=r\u00e9", "r\u00e9"),
        (f"rack={'v' * 64}", "v" * 64),
    ],
)
def test_a_label_value_holds_what_a_kubernetes_label_value_holds(text, value):
    with pytest.raises(ValueError) as refused:
        parse_labels(text)
    assert str(refused.value) == (
        f"bad value {value!r} of label 'rack': a value holds letters, digits and _ . -"
        " (starting and ending with a letter or digit, at most 63)"
    )


@pytest.mark.parametrize("text", ["rack", "rack=r1,nvlink", "=r1", " =r1"])
def test_bad_labels_say_what_is_valid(text):
    with pytest.raises(ValueError, match=r"expected key=value pairs such as rack=r1,nvlink=nv0"):
        parse_labels(text)


@pytest.mark.parametrize(
    ("text", "pair"),
    [("HF_HOME=/data/hf", ("HF_HOME", "/data/hf")), ("EMPTY=", ("EMPTY", "")), ("A=b=c", ("A", "b=c"))],
)
def test_env_pairs(text, pair):
    assert parse_env_pair(text) == pair


@pytest.mark.parametrize("text", ["NOVALUE", "1X=a", "A-B=c", "=v", "A B=c"])
def test_bad_env_pairs_say_what_is_valid(text):
    with pytest.raises(ValueError, match="expected KEY=VALUE with KEY a shell name"):
        parse_env_pair(text)
