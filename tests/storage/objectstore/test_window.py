"""The read-ahead control law on a fake clock: a consumer and a store simulated step by step.

In ``simulate`` the store answers any number of GETs in ``latency`` seconds each, unless
``parallel`` caps how many it serves at once (its bandwidth), and a larger window pays off
at once. ``simulate_requests`` requests each chunk when it enters the window and lands it a
GET later, so a growth's chunks take one GET to arrive, as they do from a real store. The
consumer needs ``consume`` seconds per chunk. A reader's wait for its next chunk is what the
simulation derives from the window.
"""

from __future__ import annotations

import itertools
import math

from tierlog.storage.objectstore.window import (
    HOLD_EPOCHS,
    INITIAL_AHEAD,
    SLOW_START_GROWTH,
    WindowLaw,
)

CHUNK = 4 * 1024 * 1024


def simulate(
    law: WindowLaw, chunks: int, *, latency: float, consume: float, parallel: int | None = None
) -> list[int]:
    """Drive ``law`` through ``chunks`` chunk advances; the window after each."""
    now = 0.0
    windows = []
    for _ in range(chunks):
        inflight = law.ahead if parallel is None else min(law.ahead, parallel)
        # a reader consuming faster than ``inflight`` chunks arrive per GET waits for the rest
        delivery = latency / inflight
        waited = max(0.0, delivery - consume)
        now += consume + waited
        law.got(latency)
        law.advanced(now, waited)
        windows.append(law.ahead)
    return windows


def simulate_requests(
    law: WindowLaw,
    chunks: int,
    *,
    latency: float,
    consume: float,
    transfer: float = 0.0,
) -> list[int]:
    """Drive ``law`` through ``chunks`` chunk advances, each chunk requested as it enters the
    window; a GET takes ``latency`` plus ``transfer`` for every GET in flight with it (a
    store whose bandwidth the GETs share). A reader about to wait calls ``waiting`` first,
    as the stream does. The window after each advance."""
    now = 0.0
    lands: dict[int, float] = {}
    requested = 0  # chunks 1..requested have been asked for; the reader starts in chunk 0
    windows = []

    def request(chunk: int, at: float) -> None:
        nonlocal requested
        while requested < chunk - 1 + law.ahead:
            requested += 1
            inflight = sum(1 for t in lands.values() if t > at)
            get = latency + (inflight + 1) * transfer
            lands[requested] = at + get
            law.got(get)

    for chunk in range(1, chunks + 1):
        request(chunk, now)
        wanted = now + consume
        if lands[chunk] > wanted:  # the reader has to wait: the stream tells the law so
            law.waiting()
            request(chunk, wanted)
        ready = max(wanted, lands[chunk])
        waited = ready - wanted
        now = ready
        law.advanced(now, waited)
        windows.append(law.ahead)
    return windows


def test_a_new_stream_starts_small() -> None:
    assert WindowLaw(CHUNK, 16).ahead == INITIAL_AHEAD
    assert WindowLaw(CHUNK, 1).ahead == 1
    assert WindowLaw(CHUNK, 0).ahead == 0


def test_the_window_grows_fourfold_in_slow_start_while_a_fast_consumer_waits() -> None:
    law = WindowLaw(CHUNK, 32, initial=2)
    windows = simulate(law, 64, latency=0.05, consume=0.0001)
    assert law.ahead == 32  # the cap: prefetch.max.size
    assert sorted(set(windows)) == [2, 8, 32]  # x4 per epoch, no other sizes
    # the first advance only starts the clock; then an epoch of 2 advances; then the
    # growth's ramp, as many advances as the window before it had (2), until the reader
    # reaches the chunks it requested; then an epoch of 8 judges it and grows again
    assert windows.index(32) == 1 + 2 + 2 + 8 - 1


def test_slow_start_ends_at_the_cap_with_a_last_step_smaller_than_fourfold() -> None:
    law = WindowLaw(CHUNK, 16, initial=2)
    windows = simulate(law, 64, latency=0.05, consume=0.0001)
    assert sorted(set(windows)) == [2, 8, 16]


def test_a_new_stream_reaches_a_32_chunk_cap_after_one_epoch() -> None:
    law = WindowLaw(CHUNK, 32)
    windows = simulate(law, 64, latency=0.05, consume=0.0001)
    assert sorted(set(windows)) == [INITIAL_AHEAD, 32]
    # the first advance only starts the clock; then one epoch of INITIAL_AHEAD advances
    assert windows.index(32) == 1 + INITIAL_AHEAD - 1


def test_the_window_stops_growing_where_the_store_stops_giving_more() -> None:
    # the store serves at most 4 GETs at a time: a window past 4 buys nothing
    law = WindowLaw(CHUNK, 32)
    windows = simulate(law, 400, latency=0.05, consume=0.0001, parallel=4)
    # slow start overshoots once (8 -> 32), then falls back to the last window that grew
    # throughput and probes one doubling past it from then on
    overshoot_ends = len(windows) - windows[::-1].index(32)
    settled = windows[overshoot_ends:]
    assert max(settled) <= 16
    assert windows[-1] in (8, 16)
    assert settled.count(8) > settled.count(16)  # held at the knee, probing now and then


def test_after_slow_start_the_window_grows_by_doublings() -> None:
    law = WindowLaw(CHUNK, 32)
    simulate(law, 64, latency=0.05, consume=0.02)  # D = 4: shrinks, slow start over
    assert law.ahead == 4
    windows = simulate(law, 64 + HOLD_EPOCHS * 16, latency=0.05, consume=0.0001)
    assert law.ahead == 32
    sizes = [w for i, w in enumerate(windows) if i == 0 or w != windows[i - 1]]
    grown = [(a, b) for a, b in itertools.pairwise(sizes) if b > a]
    assert grown and all(b == 2 * a for a, b in grown)


def test_the_window_shrinks_to_what_a_slow_consumer_drains_per_get() -> None:
    law = WindowLaw(CHUNK, 16, initial=16)
    simulate(law, 64, latency=0.05, consume=0.1)  # a chunk per 100 ms against 50 ms GETs
    assert law.demand() == math.ceil(0.05 / 0.1) + 1 == 2
    assert law.ahead == 2


def test_the_window_follows_the_consumer_down_and_back_up() -> None:
    law = WindowLaw(CHUNK, 16)
    simulate(law, 64, latency=0.05, consume=0.0001)
    assert law.ahead == 16
    simulate(law, 64, latency=0.05, consume=0.02)  # D = ceil(50 / 20) + 1 = 4
    assert law.ahead == 4
    simulate(law, 64 + HOLD_EPOCHS * 16, latency=0.05, consume=0.0001)
    assert law.ahead == 16


def test_a_resumed_law_keeps_the_window_and_the_estimates() -> None:
    law = WindowLaw(CHUNK, 16)
    simulate(law, 64, latency=0.05, consume=0.0001)
    nxt = law.resumed()
    assert nxt.ahead == 16 and nxt.get_s == law.get_s and nxt.consume_s == law.consume_s
    assert nxt.window_bytes == 16 * CHUNK


def test_the_window_grows_past_a_segment_when_each_segment_is_a_new_stream() -> None:
    # 64 MiB segments of 4 MiB chunks: a stream per 16 chunks, each resumed from the last;
    # a reader the store keeps waiting must still get past a window of one segment
    law = WindowLaw(CHUNK, 32)
    for _ in range(16):
        simulate(law, 16, latency=0.3, consume=0.001)
        law = law.resumed()
    assert law.ahead == 32


def epoch(law: WindowLaw, now: float, advances: int, seconds: float) -> float:
    """``advances`` chunk advances evenly over ``seconds``, the reader waiting before each."""
    for _ in range(advances):
        now += seconds / advances
        law.advanced(now, waited=0.01)
    return now


def test_the_epoch_after_a_growth_neither_judges_nor_grows() -> None:
    # traced in a cold read: after 8 -> 32 the reader drained the 8 chunks requested before
    # the growth at about the old window's pace while the 24 new ones were on their way,
    # and the growth's own chunks at twice that
    law = WindowLaw(CHUNK, 32)
    now = epoch(law, 0.0, 1, 0.0)  # the first advance starts the clock
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # 50 chunks/s
    assert law.ahead == 32
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # the ramp: the old window's chunks, 50/s
    assert law.ahead == 32  # judged on the ramp, the growth would look like a plateau
    epoch(law, now, 32, 0.32)  # 100 chunks/s: the growth paid
    assert law.ahead == 32


def test_a_growth_that_bought_nothing_is_still_taken_back_one_epoch_later() -> None:
    law = WindowLaw(CHUNK, 32)
    now = epoch(law, 0.0, 1, 0.0)
    now = epoch(law, now, INITIAL_AHEAD, 0.16)
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # the ramp
    assert law.ahead == 32
    epoch(law, now, 32, 0.62)  # past its ramp, still 50 chunks/s: the store is the limit
    assert law.ahead == INITIAL_AHEAD


def test_the_ramp_ends_when_the_reader_reaches_the_chunks_the_growth_requested() -> None:
    law = WindowLaw(CHUNK, 128)
    now = epoch(law, 0.0, 1, 0.0)
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # 8 -> 32
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # the ramp: 8 advances, not 32
    now = epoch(law, now, 32 - 1, 0.31)
    assert law.ahead == 32  # the judging epoch is 32 advances long
    epoch(law, now, 1, 0.01)  # 100 chunks/s against 50: kept, and slow start goes on
    assert law.ahead == 128


def test_a_store_that_gives_more_with_more_in_flight_keeps_the_window_at_the_cap() -> None:
    # 300 ms GETs whatever their number, each chunk requested as it enters the window
    law = WindowLaw(CHUNK, 32)
    windows = simulate_requests(law, 256, latency=0.3, consume=0.001)
    assert set(windows) == {32}  # grown as the reader first waited, then kept


def test_with_ramps_the_window_still_falls_back_where_the_store_stops_giving_more() -> None:
    # every GET in flight adds 50 ms to each: past about 8 in flight the store's bandwidth,
    # not the window, limits the reader, and 32 ahead gives within 10 % of what 8 give
    law = WindowLaw(CHUNK, 32)
    windows = simulate_requests(law, 400, latency=0.05, consume=0.0001, transfer=0.05)
    overshoot_ends = len(windows) - windows[::-1].index(32)
    settled = windows[overshoot_ends:]
    assert overshoot_ends < 100
    assert max(settled) <= 16
    assert settled.count(8) > settled.count(16)


def test_a_reader_waiting_in_its_first_epoch_grows_the_window_at_once() -> None:
    law = WindowLaw(CHUNK, 128)
    law.advanced(0.0, 0.0)  # the reader in its first chunk
    law.waiting()  # ... and already at the end of it, before the next has landed
    assert law.ahead == SLOW_START_GROWTH * INITIAL_AHEAD
    law.waiting()  # only the first epoch is decided this way
    assert law.ahead == SLOW_START_GROWTH * INITIAL_AHEAD


def test_a_reader_that_waits_only_after_its_first_epoch_grows_when_the_epoch_ends() -> None:
    law = WindowLaw(CHUNK, 32)
    now = epoch(law, 0.0, 1, 0.0)
    now = epoch(law, now, INITIAL_AHEAD, 0.16)  # decided at its end: grown
    assert law.ahead == 32
    epoch(law, now, 32, 0.64)  # the ramp
    law.waiting()
    assert law.ahead == 32


def growth_at_first_wait(first_get_s: float, judged_chunks_per_s: float) -> WindowLaw:
    """A law whose first window's GETs took ``first_get_s`` each, grown at the reader's
    first wait, through its ramp and the epoch that judges it at that pace."""
    law = WindowLaw(CHUNK, 32)
    for _ in range(INITIAL_AHEAD):
        law.got(first_get_s)
    law.advanced(0.0, 0.0)
    law.waiting()
    assert law.ahead == 32
    # the ramp: the first window's chunks, the first of them the one waited for
    now = epoch(law, 0.0, INITIAL_AHEAD, INITIAL_AHEAD / judged_chunks_per_s)
    assert law.ahead == 32
    epoch(law, now, 32, 32 / judged_chunks_per_s)
    return law


def test_a_growth_at_the_first_wait_is_kept_when_it_beats_the_first_windows_best() -> None:
    # 8 chunks per 0.2 s GET: the first window drains 40 chunks/s at best
    assert growth_at_first_wait(0.2, judged_chunks_per_s=80).ahead == 32


def test_a_growth_at_the_first_wait_that_bought_nothing_is_taken_back() -> None:
    assert growth_at_first_wait(0.2, judged_chunks_per_s=42).ahead == INITIAL_AHEAD
