"""Before/after plots: each variant at its own phases, the GPU's capacity, OOM points, a legend
under the data that says when two variants coincide. Played from the real H200 recordings."""

from __future__ import annotations

import pytest

from lab.course.reference import REFERENCE_DIR, load_reference
from lab.tui.align import align, merge_orders
from lab.tui.widgets.timeline import TimelinePlot, phase_label, tried_bytes

from tui_helpers import COURSE, make_app, run_and_wait


def test_align_gives_each_phase_the_width_of_its_longest_variant():
    # Given two runs whose forward takes 1 and 3 events, and a third that never got to input 2
    a = [("model", 0), ("input 1", 2), ("forward 1", 3), ("input 2", 4)]
    b = [("model", 0), ("input 1", 2), ("forward 1", 3), ("input 2", 6)]
    c = [("model", 0), ("input 1", 2), ("forward 1", 3)]
    axis = align([(a, 0, 5), (b, 0, 7), (c, 0, 3)])
    seg = {s.name: (s.start, s.width) for s in axis.segments}
    # then forward 1 is as wide as b's (3 events) and every run starts it at the same x
    assert seg == {"model": (0, 2), "input 1": (2, 1), "forward 1": (3, 3), "input 2": (6, 2)}
    for k, starts in enumerate((a, b, c)):
        for name, event in starts:
            assert axis.x(k, event) == seg[name][0], (k, name)
    assert axis.x(0, 5) == 7  # a's last event sits one into its own input 2


def test_merge_keeps_every_runs_order_and_labels_are_never_cut():
    assert merge_orders([[("a", 0), ("c", 0)], [("a", 0), ("b", 0), ("c", 0)]]) == [
        ("a", 0), ("b", 0), ("c", 0)]
    assert phase_label("forward 2", 9) == "forward 2"
    assert phase_label("forward 2", 6) == "fwd 2"
    assert phase_label("forward 2", 4) == ""  # not "forw"
    assert phase_label("optimizer 12", 4) == ""
    assert tried_bytes("Tried to allocate 1.53 GiB. GPU 0") == int(1.53 * 2**30)


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~6 CPU-s (Textual's layout)
@pytest.mark.parametrize("number", [8, 18])  # mixed precision; out of memory
async def test_each_variant_is_drawn_and_labelled_at_its_own_phases(number):
    # Given the H200 recordings of a lesson whose variants do different work per phase
    lesson = next(l for l in COURSE.lessons if l.number == number)
    refs = load_reference(lesson.id, REFERENCE_DIR)
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        await run_and_wait(pilot)  # no GPU: r plays the recording
        plot = app.screen.query_one("#timeline", TimelinePlot)
        assert [s.label for s in plot.series] == [v.name for v in lesson.variants if v.name in refs]
        starts = {s.name: s.start for s in plot.axis.segments}
        # then every variant's every phase starts exactly at that phase's line, not at the
        # first variant's event index
        for k, s in enumerate(plot.series):
            for name, event in s.phase_starts:
                assert plot.axis.x(k, event) == starts[name], (s.label, name)
        # and the phase names under the frame sit at their lines, whole or in a short form
        plot.render()
        left, right = plot._frame
        lo, hi = plot._xlim
        assert plot.placed, "no phase label fits"
        for name, label, col in plot.placed:
            want = left + 1 + (starts[name] - lo) / (hi - lo) * (right - left - 2)
            assert abs(col - want) <= 1, (name, col, want)
            assert label == name or label == phase_label(name, len(label)), (name, label)


@pytest.mark.slow  # lesson 18's five recordings drawn (~5 s on 2 cores)
async def test_capacity_line_oom_points_and_a_legend_under_the_data():
    lesson = next(l for l in COURSE.lessons if l.id == "out-of-memory")
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        await run_and_wait(pilot)
        plot = app.screen.query_one("#timeline", TimelinePlot)
        # the lesson's 16 GiB GPU is drawn (the recordings carry the cap they ran under)
        assert plot.capacity == (16 * 2**30, "GPU capped at 17.18 GB (16 GiB)")
        assert "─ GPU capped at 17.18 GB (16 GiB)" in plot.notes
        text = plot.render().plain
        lines = text.splitlines()
        top = next(i for i, line in enumerate(lines) if "┌" in line)
        bottom = next(i for i, line in enumerate(lines) if "└" in line)
        inside = lines[top + 1:bottom]
        assert any(line.count("─") > 20 for line in inside)  # the capacity line itself
        assert sum(line.count("✕") for line in inside) == 2  # baseline and bf16 ran out
        legend = "\n".join(lines[bottom + 2:])
        assert "✕ out of memory" in legend and "━ bf16_checkpointing" in legend
        assert all("━" not in line for line in inside[:3])  # no legend over the data


@pytest.mark.slow  # the quick tier's 2 minutes: an app test, ~3-7 CPU-s (Textual's layout)
async def test_two_variants_drawn_on_top_of_each_other_are_named():
    lesson = next(l for l in COURSE.lessons if l.id == "mixed-precision")
    app = make_app(references=REFERENCE_DIR)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        app.open_lesson(lesson)
        await pilot.pause()
        await run_and_wait(pilot)
        plot = app.screen.query_one("#timeline", TimelinePlot)
        plot.render()
        assert "bf16 = fp16, drawn under it" in plot.notes
        assert not any("baseline =" in n for n in plot.notes)
