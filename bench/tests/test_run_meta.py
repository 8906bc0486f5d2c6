"""What a bench report says about the scheduling weight it ran at."""

from __future__ import annotations

from bench.run_meta import (
    cpu_ticks,
    describe_weight,
    parse_cpu_line,
    session_weight,
    stolen_share,
)


def test_the_load_generator_session_nice_is_read_from_autogroup() -> None:
    text = describe_weight(0, "1\n", "/autogroup-23139 nice -19\n")
    assert text.startswith("process nice 0; load generator's session at autogroup nice -19,")


def test_autogroup_off_says_so() -> None:
    assert describe_weight(5, "0\n", "/autogroup-1 nice 0\n") == (
        "process nice 5; autogroup scheduling off"
    )


def test_an_empty_or_unreadable_autogroup_is_unknown() -> None:
    # Containers can give an empty /proc/self/autogroup.
    assert describe_weight(0, "1\n", "") == "process nice 0; autogroup unknown"
    assert describe_weight(0, "1\n", "garbage") == "process nice 0; autogroup unknown"
    assert describe_weight(0, None, None) == "process nice 0; autogroup unknown"


def test_this_machine_gives_an_answer() -> None:
    assert session_weight().startswith("process nice ")


def test_stolen_ticks_are_the_eighth_field_of_the_cpu_line() -> None:
    line = "cpu  3845230 12042 851073 5324452 9371 0 141606 67365 0 0\n"
    assert parse_cpu_line(line) == (
        67365,
        3845230 + 12042 + 851073 + 5324452 + 9371 + 141606 + 67365,
    )


def test_an_odd_cpu_line_gives_nothing() -> None:
    assert parse_cpu_line("") is None
    assert parse_cpu_line("cpu0 1 2 3 4 5 6 7 8") is None  # one CPU, not all
    assert parse_cpu_line("cpu 1 2 3") is None  # a kernel without steal time
    assert parse_cpu_line("cpu 1 2 3 4 5 6 7 x") is None


def test_the_stolen_share_is_of_the_ticks_between_two_readings() -> None:
    assert stolen_share((10, 1000), (30, 1200)) == 0.1
    assert stolen_share((10, 1000), (10, 1000)) is None  # no time passed
    assert stolen_share(None, (10, 1000)) is None


def test_this_machine_reads_its_ticks() -> None:
    ticks = cpu_ticks()
    assert ticks is not None and 0 <= ticks[0] <= ticks[1]
