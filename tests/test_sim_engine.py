"""The event queue's order: time, then insertion sequence; events added for the running time join
its pass after the ones already there; a reserved place holds in a time's list whether that list
exists yet, is waiting, or is running (the queue keeps one insertion-ordered list per time)."""

from __future__ import annotations

from chakra_pipe.sim.engine import EventQueue


def test_same_time_events_run_in_insertion_order_after_earlier_times() -> None:
    q, log = EventQueue(), list[tuple[int, str]]()

    def note(name: str) -> None:
        log.append((q.now, name))

    q.schedule(7, note, "x")
    q.schedule(3, note, "a")
    q.schedule(7, note, "y")
    q.schedule(3, lambda: (note("b"), q.schedule(3, note, "d"), q.schedule(5, note, "e")))
    q.schedule(3, note, "c")
    q.run()
    assert log == [(3, "a"), (3, "b"), (3, "c"), (3, "d"), (5, "e"), (7, "x"), (7, "y")]
    assert q.now == 7


def test_reserved_places_in_new_waiting_and_running_times() -> None:
    """Three reservations: one for a time nothing else uses, one between two waiting events of a
    later time, one in the pass that is running (after the running event, before one it added)."""
    q, log = EventQueue(), list[str]()
    first, second = q.reserve(), q.reserve()
    q.schedule(9, log.append, "late-1")
    q.schedule(4, log.append, "t4-a")
    q.schedule(9, log.append, "late-2")

    def at_4() -> None:
        log.append("t4-b")
        now = q.reserve()
        q.schedule(4, log.append, "t4-d")
        q.schedule_reserved(4, now, log.append, "t4-c")  # this pass, before t4-d
        q.schedule_reserved(9, second, log.append, "t9-reserved")  # before both late events
        q.schedule_reserved(6, first, log.append, "t6-reserved")  # a time of its own

    q.schedule(4, at_4)
    q.run()
    assert log == ["t4-a", "t4-b", "t4-c", "t4-d", "t6-reserved", "t9-reserved", "late-1", "late-2"]
