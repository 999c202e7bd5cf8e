"""subjects/transform.py against what a real nats-server 2.15.1 did with the same transforms: which configs it
accepted or refused (and with which error), and the subject it stored each published subject under (stream
subject_transform, read back with STREAM.MSG.GET). RePublish maps subjects with the same code in nats-server."""

from __future__ import annotations

import pytest

from subjects.transform import SubjectTransform, TransformError, new_transform, validate_mapping

# stream subject_transform configs a real nats-server 2.15.1 accepted (None) or refused (10156's detail)
STREAM_TRANSFORM_CONFIGS = [
    ('in.*.*', 'out.{{wildcard(1)}}.{{wildcard(2)}}', None),
    ('in.*.*', 'out.$2.$1', None),
    ('in.*.*', 'out.{{partition(3,1,2)}}', None),
    ('in.*.*', 'out.{{partition(3)}}', None),
    ('in.x', 'out.{{partition(3)}}', None),
    ('in.x', 'out.$1', 'invalid mapping destination: wildcard index out of range in $1'),
    ('in.*', 'out.$2', 'invalid mapping destination: wildcard index out of range in $2: [2]'),
    ('in.*', 'out.$0', None),
    ('in.*', 'out.{{wildcard()}}', 'invalid mapping destination: not enough arguments passed to the function in {{wildcard()}}'),
    ('in.*', 'out.{{wildcard(1,2)}}', 'invalid mapping destination: too many arguments passed to the function in {{wildcard(1,2)}}'),
    ('in.*', 'out.{{wildcard(a)}}', 'invalid mapping destination: function argument is invalid or in the wrong format in {{wildcard(a)}}'),
    ('in.*', 'out.{{unknown(1)}}', 'invalid mapping destination: unknown function in {{unknown(1)}}'),
    ('in.*', 'out.{{left(1,2)}}', None),
    ('in.*', 'out.{{right(1,2)}}', None),
    ('in.*', 'out.{{split(1,-)}}', None),
    ('in.*', 'out.{{split(1)}}', 'invalid mapping destination: not enough arguments passed to the function in {{split(1)}}'),
    ('in.*', 'out.{{split(1,-,x)}}', 'invalid mapping destination: too many arguments passed to the function in {{split(1,-,x)}}'),
    ('in.*', 'out.{{splitFromLeft(1,2)}}', None),
    ('in.*', 'out.{{SplitFromRight(1,2)}}', None),
    ('in.*', 'out.{{sliceFromLeft(1,2)}}', None),
    ('in.*', 'out.{{sliceFromRight(1,2)}}', None),
    ('in.*', 'out.{{sliceFromRight(1)}}', 'invalid mapping destination: not enough arguments passed to the function in {{sliceFromRight(1)}}'),
    ('in.*', 'out.{{sliceFromRight(1,2,3)}}', 'invalid mapping destination: too many arguments passed to the function in {{sliceFromRight(1,2,3)}}'),
    ('in.*', 'out.{{sliceFromRight(1,x)}}', 'invalid mapping destination: function argument is invalid or in the wrong format in {{sliceFromRight(1,x)}}'),
    ('in.*', 'out.{{random(5)}}', None),
    ('in.*', 'out.*', 'invalid subject'),
    ('in.*', 'out.>', 'invalid subject'),
    ('in.>', 'out.>', None),
    ('in.>', 'out', 'invalid subject'),
    ('in.*', 'out..x', 'invalid mapping destination: invalid transform'),
    ('in.*', 'out.{{ wildcard( 1 ) }}', None),
    ('in.*', 'out.{{Wildcard(1)}}', None),
    ('in.*', 'out.{{WILDCARD(1)}}', 'invalid mapping destination: unknown function in {{WILDCARD(1)}}'),
    ('in.*', 'out.a{{wildcard(1)}}', None),
    ('in.*', 'out.{{wildcard(1)}}x', None),
    ('in.*', 'out.$x', None),
    ('in.*', 'out.$1x', None),
    ('in.*', 'out.>.x', 'invalid mapping destination: invalid transform in x'),
    ('in.*', '', None),
    ('', 'out.>', None),
    ('in.*', 'out.{{partition(-1,1)}}', None),
    ('in.*', 'out.{{partition(99999999999,1)}}', 'invalid mapping destination: function argument is invalid or in the wrong format in {{partition(99999999999,1)}}'),
    ('in.*', 'out.{{wildcard(+1)}}', None),
    ('in.*', 'out.{{wildcard(-1)}}', None),
    ('in.*', 'out.{{split(1, )}}', None),
    ('in.*', 'out.{{}}', None),
    ('in.*', 'out.{{x}}', 'invalid mapping destination: unknown function in {{x}}'),
]
# the same pairs as RePublish: accepted (True) or refused with 10052 (False)
REPUBLISH_CONFIGS = [
    ('in.*.*', 'out.{{wildcard(1)}}.{{wildcard(2)}}', True),
    ('in.*.*', 'out.$2.$1', True),
    ('in.*.*', 'out.{{partition(3,1,2)}}', True),
    ('in.*.*', 'out.{{partition(3)}}', True),
    ('in.x', 'out.{{partition(3)}}', True),
    ('in.x', 'out.$1', False),
    ('in.*', 'out.$2', False),
    ('in.*', 'out.$0', True),
    ('in.*', 'out.{{wildcard()}}', False),
    ('in.*', 'out.{{wildcard(1,2)}}', False),
    ('in.*', 'out.{{wildcard(a)}}', False),
    ('in.*', 'out.{{unknown(1)}}', False),
    ('in.*', 'out.{{left(1,2)}}', True),
    ('in.*', 'out.{{right(1,2)}}', True),
    ('in.*', 'out.{{split(1,-)}}', True),
    ('in.*', 'out.{{split(1)}}', False),
    ('in.*', 'out.{{split(1,-,x)}}', False),
    ('in.*', 'out.{{splitFromLeft(1,2)}}', True),
    ('in.*', 'out.{{SplitFromRight(1,2)}}', True),
    ('in.*', 'out.{{sliceFromLeft(1,2)}}', True),
    ('in.*', 'out.{{sliceFromRight(1,2)}}', True),
    ('in.*', 'out.{{sliceFromRight(1)}}', False),
    ('in.*', 'out.{{sliceFromRight(1,2,3)}}', False),
    ('in.*', 'out.{{sliceFromRight(1,x)}}', False),
    ('in.*', 'out.{{random(5)}}', True),
    ('in.*', 'out.*', False),
    ('in.*', 'out.>', False),
    ('in.>', 'out.>', True),
    ('in.>', 'out', False),
    ('in.*', 'out..x', False),
    ('in.*', 'out.{{ wildcard( 1 ) }}', True),
    ('in.*', 'out.{{Wildcard(1)}}', True),
    ('in.*', 'out.{{WILDCARD(1)}}', False),
    ('in.*', 'out.a{{wildcard(1)}}', True),
    ('in.*', 'out.{{wildcard(1)}}x', True),
    ('in.*', 'out.$x', True),
    ('in.*', 'out.$1x', True),
    ('in.*', 'out.>.x', False),
    ('in.*', '', True),
    ('', 'out.>', True),
    ('in..x', 'out', False),
    ('in.*', 'out.{{partition(-1,1)}}', True),
    ('in.*', 'out.{{partition(99999999999,1)}}', False),
    ('in.*', 'out.{{wildcard(+1)}}', True),
    ('in.*', 'out.{{wildcard(-1)}}', True),
    ('in.*', 'out.{{split(1, )}}', True),
    ('in.*', 'out.{{}}', True),
    ('in.*', 'out.{{x}}', False),
]
# (src, dest, [(published subject, stored subject)]) as a real nats-server 2.15.1 stored them
STORED_SUBJECTS = [
    ('in.*.*', 'out.{{wildcard(2)}}.{{wildcard(1)}}', [('in.a.b', 'out.b.a'), ('in.aa.bb', 'out.bb.aa')]),
    ('in.*.*', 'out.$2.$1', [('in.a.b', 'out.b.a')]),
    ('in.*.*', 'out.{{partition(3,1,2)}}.$1.$2', [('in.a.b', 'out.0.a.b'), ('in.foo.bar', 'out.1.foo.bar'), ('in.1.2', 'out.1.1.2'), ('in.x.y', 'out.1.x.y'), ('in.é.ü', 'out.1.é.ü')]),
    ('in.*.*', 'out.{{partition(3,2,1)}}.$1.$2', [('in.a.b', 'out.2.a.b'), ('in.foo.bar', 'out.1.foo.bar')]),
    ('in.*.*', 'out.{{partition(5)}}', [('in.a.b', 'out.0'), ('in.foo.bar', 'out.1'), ('in.1.2', 'out.3')]),
    ('in.x', 'out.{{partition(7)}}', [('in.x', 'out.5')]),
    ('in.*', 'out.{{partition(0,1)}}', [('in.abc', 'out.0')]),
    ('in.*', 'out.{{partition(-1,1)}}', [('in.abc', 'out.440920331'), ('in.x', 'out.4245442695')]),
    ('in.*', 'out.{{partition(-7,1)}}', [('in.abc', 'out.440920331'), ('in.x', 'out.4245442695')]),
    ('in.*', 'out.$0', [('in.abc', 'out.in')]),
    ('in.*', 'out.{{wildcard(-1)}}', [('in.abc', 'out.in')]),
    ('in.*', 'out.{{left(1,2)}}', [('in.abcdef', 'out.ab'), ('in.a', 'out.a'), ('in.ab', 'out.ab'), ('in.é', 'out.é')]),
    ('in.*', 'out.{{left(1,0)}}', [('in.abcdef', 'out.abcdef')]),
    ('in.*', 'out.{{right(1,2)}}', [('in.abcdef', 'out.ef'), ('in.a', 'out.a'), ('in.ab', 'out.ab')]),
    ('in.*', 'out.{{split(1,-)}}', [('in.a-b-c', 'out.a.b.c'), ('in.-a-b-', 'out.a.b'), ('in.--a--b--', 'out..a.b'), ('in.abc', 'out.abc'), ('in.-', 'out.'), ('in.--', 'out.'), ('in.a-', 'out.a')]),
    ('in.*', 'out.{{split(1,ab)}}', [('in.xabyabz', 'out.x.y.z'), ('in.abab', 'out.')]),
    ('in.*', 'out.{{splitFromLeft(1,2)}}', [('in.abcdef', 'out.ab.cdef'), ('in.ab', 'out.ab'), ('in.a', 'out.a'), ('in.abc', 'out.ab.c')]),
    ('in.*', 'out.{{SplitFromRight(1,2)}}', [('in.abcdef', 'out.abcd.ef'), ('in.ab', 'out.ab'), ('in.a', 'out.a'), ('in.abc', 'out.a.bc')]),
    ('in.*', 'out.{{sliceFromLeft(1,2)}}', [('in.abcdef', 'out.ab.cd.ef'), ('in.abcde', 'out.ab.cd.e'), ('in.ab', 'out.ab'), ('in.a', 'out.a'), ('in.abc', 'out.ab.c')]),
    ('in.*', 'out.{{sliceFromRight(1,2)}}', [('in.abcdef', 'out.ab.cd.ef'), ('in.abcde', 'out.a.bc.de'), ('in.ab', 'out.ab'), ('in.a', 'out.a'), ('in.abc', 'out.a.bc')]),
    ('in.*', 'out.{{sliceFromLeft(1,3)}}', [('in.abcdefgh', 'out.abc.def.gh'), ('in.abcd', 'out.abc.d')]),
    ('in.*', 'out.{{sliceFromRight(1,3)}}', [('in.abcdefgh', 'out.ab.cde.fgh'), ('in.abcd', 'out.a.bcd')]),
    ('in.*', 'out.{{sliceFromLeft(1,0)}}', [('in.abcd', 'out.abcd')]),
    ('in.>', 'out.>', [('in.a', 'out.a'), ('in.a.b.c', 'out.a.b.c')]),
    ('in.*.>', 'out.$1.>', [('in.a.b', 'out.a.b'), ('in.a.b.c', 'out.a.b.c')]),
    ('in.*.>', 'out.>', [('in.a.b', 'out.b'), ('in.a.b.c', 'out.b.c')]),
    ('in.a', 'out.b', [('in.a', 'out.b'), ('in.c', 'in.c')]),
    ('in.*', 'out.{{ wildcard( 1 ) }}', [('in.z', 'out.z')]),
    ('in.*', 'out.$x.{{}}', [('in.z', 'out.$x.{{}}')]),
    ('in.*', 'out.{{split(1, )}}', [('in.abc', 'out.a.b.c')]),
    ('in.*', 'x.{{wildcard(1)}}x', [('in.q', 'x.{{wildcard(1)}}x')]),
    ('', 'out.>', [('in.q.r', 'out.in.q.r')]),
    ('in.*', '', [('in.q', 'in.q')]),
    ('in.*.*', 'out.$1', [('in.*.b', 'in.*.b'), ('in.>.b', 'in.>.b'), ('in.a.*', 'in.a.*')]),
]


@pytest.mark.parametrize(("src", "dest", "error"), STREAM_TRANSFORM_CONFIGS)
def test_stream_transform_validation_as_the_server(src: str, dest: str, error: str | None) -> None:
    if error is None:
        validate_mapping(src, dest)
        return
    with pytest.raises(TransformError) as info:
        validate_mapping(src, dest)
    assert str(info.value) == error


@pytest.mark.parametrize(("src", "dest", "accepted"), REPUBLISH_CONFIGS)
def test_republish_transform_acceptance_as_the_server(src: str, dest: str, accepted: bool) -> None:
    try:
        new_transform(src, dest)
    except TransformError:
        assert not accepted
    else:
        assert accepted


@pytest.mark.parametrize(("src", "dest", "stored"), STORED_SUBJECTS)
def test_subjects_map_as_the_server_stored_them(src: str, dest: str, stored: list[tuple[str, str]]) -> None:
    transform = new_transform(src, dest)
    for published, expected in stored:
        mapped = None if transform is None else transform.apply(published)
        # a subject the transform does not take is stored as published
        assert (published if mapped is None else mapped) == expected, published


def test_random_stays_below_its_ceiling_and_zero_gives_zero() -> None:
    transform = SubjectTransform.compile("in.*", "out.{{random(3)}}.$1")
    seen = {transform.apply("in.x") for _ in range(200)}
    assert seen <= {"out.0.x", "out.1.x", "out.2.x"} and len(seen) > 1
    assert SubjectTransform.compile("in.*", "out.{{random(0)}}").apply("in.x") == "out.0"


def test_lengths_count_bytes_as_in_go() -> None:
    # "é" is two bytes: left(…,1) cuts it in half, and the halves survive as the raw bytes nats-server sends
    half = SubjectTransform.compile("in.*", "out.{{left(1,1)}}").apply("in.é")
    assert half is not None and half.encode("utf-8", "surrogateescape") == b"out.\xc3"


def test_an_empty_destination_is_no_transform() -> None:
    assert new_transform("in.*", "") is None
    with pytest.raises(TransformError):
        SubjectTransform.compile("in.*", "")
