"""What a bench report says about the scheduling weight it ran at."""

from __future__ import annotations

from bench.run_meta import describe_weight, session_weight


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
