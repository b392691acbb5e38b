"""Workshops: the lab served to browsers, the class state, the instructor's view.

    policy.py     served mode: what a lab served to a browser may not do (one place)
    limits.py     what one learner may take: tabs, and the work a tab may start (serve flags)
    workshop.py   the workshop folder: learners (sanitised names), the access token
    identity.py   signed cookies (the workshop's secret), names claimed with a code, a cap
    lifeline.py   a tab's app exits when its server dies; a new server reaps leftovers
    auth.py       the access guard: an aiohttp middleware on every route (aiohttp)
    server.py     `LabServer`: textual-serve's Server + the guard + one app per tab (aiohttp)
    classroom.py  the class state: runs the instructor pushed, the lesson everyone is on
    classview.py  the instructor's view per lesson: text, Markdown, CSV, a plotext histogram

All headless (no Textual). auth.py and server.py need the `serve` extra (textual-serve,
aiohttp): only `memlab serve` imports them. The app's half is lab/tui/classroom.py.
"""
