"""The framer keeps every byte: frames joined with \\n give back the stream, however it was chunked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_relay.protocol.framing import LineFramer
from acp_relay.protocol.tracker import A2C, C2A, Tracker

streams = st.lists(
    st.binary(max_size=40) | st.sampled_from([b"\n", b"\r\n", b'{"a":1}\n', b"\xff\xfe", b"[]\n"]), max_size=30
).map(b"".join)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def frame_all(data: bytes, cuts: list[int]) -> tuple[list[bytes], bytes | None]:
    framer = LineFramer()
    lines: list[bytes] = []
    for chunk in split(data, cuts):
        lines.extend(framer.feed(chunk))
    return lines, framer.finish()


@given(streams, st.lists(st.integers(min_value=0), max_size=10))
def test_frames_rejoin_to_the_stream(data: bytes, cuts: list[int]) -> None:
    lines, last = frame_all(data, cuts)
    rebuilt = b"".join(line + b"\n" for line in lines) + (last or b"")
    assert rebuilt == data
    assert (last is not None) == (bool(data) and not data.endswith(b"\n"))
    assert all(b"\n" not in line for line in lines)


@given(streams, st.lists(st.integers(min_value=0), max_size=10))
def test_tracker_frames_rejoin_and_never_raise(data: bytes, cuts: list[int]) -> None:
    tracker = Tracker()
    frames = []
    for chunk in split(data, cuts):
        frames += tracker.feed(C2A, chunk, 1.0, 0.0)
        frames += tracker.feed(A2C, chunk, 1.0, 0.0)
    frames += tracker.eof(C2A, 2.0, 1.0) + tracker.eof(A2C, 2.0, 1.0)
    for direction in (C2A, A2C):
        mine = [f for f in frames if f.direction == direction]
        rebuilt = b"".join(f.raw + (b"" if f.unterminated else b"\n") for f in mine)
        assert rebuilt == data
    assert [f.seq for f in frames] == list(range(1, len(frames) + 1))


def test_blank_cr_and_unterminated_lines_are_frames() -> None:
    lines, last = frame_all(b"\n\r\nabc", [1, 2])
    assert lines == [b"", b"\r"] and last == b"abc"


def test_a_32_mib_line_in_small_chunks() -> None:
    line = b"x" * (32 << 20)
    framer = LineFramer()
    out: list[bytes] = []
    for i in range(0, len(line), 65536):
        out += framer.feed(line[i : i + 65536])
    assert framer.pending == len(line)
    out += framer.feed(b"\nnext")
    assert out == [line] and framer.finish() == b"next"


@given(streams, st.lists(st.integers(min_value=0), max_size=10))
def test_long_lines_gather_in_place_and_still_rejoin(data: bytes, cuts: list[int]) -> None:
    import acp_relay.protocol.framing as framing

    old, framing.BIG_FRAME = framing.BIG_FRAME, 8  # every line over 8 bytes takes the long-line path
    try:
        lines, last = frame_all(data, cuts)
    finally:
        framing.BIG_FRAME = old
    assert b"".join(bytes(line) + b"\n" for line in lines) + bytes(last or b"") == data


def test_sparse_and_dense_chunks_split_alike() -> None:
    long, short = b"L" * 9000, b"s" * 10
    for data in (
        long + b"\n" + long + b"\n" + short,
        long + b"\n" + short + b"\n" + short + b"\n" + long,
        b"\n" + long + b"\n\n" + long + b"\n",
        short + b"\n" + long,
        long + b"\n",
    ):
        for cut in (0, 1, 5000, 9000, 9001, len(data)):
            framer = LineFramer()
            lines = framer.feed(data[:cut]) + framer.feed(data[cut:])
            last = framer.finish()
            assert lines + ([last] if last is not None else []) == data.split(b"\n")[: None if last else -1]
