"""Lesson authoring tools: `memlab dev check | new | cite | goldens`.

    check    every lesson on disk checked like code: structure, claims vs recordings, typed numbers
    new      scaffold lessons/NN-slug from a working template
    cite     render the recorded H200 numbers into each lesson.md's <!-- h200 --> block
    goldens  the sim goldens (tests/goldens/sim): a fixed subset of sim runs checked in exactly;
             rewritten only with a reason (goldens, goldens_regen; sim_probe: which mechanisms
             a run took)

check, new and cite are torch-free; goldens runs the simulator (torch, imported when it runs).
"""
