"""Lesson authoring tools, torch-free: `memlab dev check | new | cite`.

    check   every lesson on disk checked like code: structure, claims vs recordings, typed numbers
    new     scaffold lessons/NN-slug from a working template
    cite    render the recorded H200 numbers into each lesson.md's <!-- h200 --> block
"""
