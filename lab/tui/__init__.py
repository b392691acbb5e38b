"""The Textual lab app. Entry point: `lab.tui.app.run_app()`."""

__all__ = ["MemLabApp", "run_app"]


def __getattr__(name):  # lazy: `import lab.tui` stays cheap
    if name in __all__:
        from . import app

        return getattr(app, name)
    raise AttributeError(name)
