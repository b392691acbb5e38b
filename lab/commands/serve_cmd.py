"""`memlab serve`: the lab in the browser for a workshop (textual-serve, one app per tab).

    memlab serve                          http://localhost:8000 on this machine (or an SSH tunnel)
    memlab serve --host 0.0.0.0           every address: learners need the access token it prints
    memlab serve --data /srv/workshop     where learners' progress and the class state live

Needs the optional extra: `pip install 'memlab[serve]'`. docs/WORKSHOPS.md says how to run a
workshop with it (SSH tunnels, the token, TLS in front, `memlab class`).
"""

from __future__ import annotations

import os

from lab.commands import UsageError
from lab.serve.identity import MAX_LEARNERS
from lab.serve.limits import MAX_TABS, SIZE_FACTOR

TOKEN_ENV = "MEMLAB_SERVE_TOKEN"


def add_parser(sub) -> None:
    p = sub.add_parser("serve", help="serve the lab to browsers (workshops; one app per tab)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine and SSH tunnels; "
                        "any other address requires the access token)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--data", metavar="DIR",
                   help="workshop folder: learners' progress, the class state, the token "
                        "(default: the lab's data folder's 'workshop')")
    p.add_argument("--token", metavar="TOKEN",
                   help=f"access token (default: ${TOKEN_ENV}, else one kept in the workshop "
                        "folder; required off loopback)")
    p.add_argument("--max-learners", metavar="N", default=str(MAX_LEARNERS),
                   help=f"names this class accepts (default {MAX_LEARNERS}); a new name past "
                        "it is refused")
    p.add_argument("--max-tabs", metavar="N", default=str(MAX_TABS),
                   help=f"browser tabs (app processes on this machine) one learner may have open "
                        f"at once (default {MAX_TABS}); the next one is refused with a page "
                        "that says so")
    p.add_argument("--tab-modes", metavar="LIST", default="cuda,sim,cpu",
                   help="the modes a browser tab may run, joined with ',' (default "
                        "cuda,sim,cpu); cpu runs only at the small scale whatever this says")
    p.add_argument("--max-size-factor", metavar="F", default=f"{SIZE_FACTOR:g}",
                   help=f"each size a tab's playground sets (batch, seq) at most F times the "
                        f"workload's own at that scale (default {SIZE_FACTOR:g})")
    p.add_argument("--public-url", metavar="URL",
                   help="the address learners use when a proxy (TLS) stands in front, "
                        "e.g. https://lab.example.org")
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise UsageError("memlab serve needs textual-serve: pip install 'memlab[serve]'") from None
    from lab.report.numbers import NumberError, parse_number

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1 to 65535 (got {args.port})")
    from lab.serve.limits import LimitError, TabLimits

    try:
        max_learners = parse_number(args.max_learners, what="--max-learners", lo=1, hi=100_000,
                                    integer=True)
        limits = TabLimits(
            int(parse_number(args.max_tabs, what="--max-tabs", lo=1, hi=1000, integer=True)),
            tuple(m.strip() for m in args.tab_modes.split(",") if m.strip()),
            float(parse_number(args.max_size_factor, what="--max-size-factor", lo=0.01,
                               hi=1000)))
    except (NumberError, LimitError) as e:
        raise UsageError(str(e)) from None
    if args.public_url and not args.public_url.startswith(("http://", "https://")):
        raise UsageError(f"--public-url must start with http:// or https:// "
                         f"(got {args.public_url!r})")
    from lab.serve.workshop import is_loopback, load_or_create_token, workshop_dir
    from lab.user_files import UserFileError

    token = args.token or os.environ.get(TOKEN_ENV) or None
    # the tabs' processes inherit this one's environment: the token stays here, in memory
    os.environ.pop(TOKEN_ENV, None)
    from lab.serve.server import LabServer

    try:
        root = workshop_dir(args.data)
        # off loopback, or behind a proxy that others reach: the token is not optional
        if token is None and (not is_loopback(args.host) or args.public_url):
            token = load_or_create_token(root)
        root.mkdir(parents=True, exist_ok=True)
        server = LabServer(root, args.host, args.port, token, args.public_url,
                           say=lambda text: print(text, flush=True), max_learners=max_learners,
                           limits=limits)
    except UserFileError as e:  # --data is a file; its token or secret is a folder, a FIFO
        raise UsageError(str(e)) from None
    except OSError as e:  # the workshop folder cannot be written, or its secret is damaged
        raise UsageError(f"the workshop folder ({args.data or 'the default'}): "
                         f"{e.strerror or e}") from None
    try:
        server.serve()
    except OSError as e:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    return 0
