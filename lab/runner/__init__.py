"""Running measurements: one fresh worker process per variant (N for N ranks), never in-process.

    client.default_runner()   the machine's runner service, else a direct worker (`Runner`)
    loop.run_all              the one run loop: N at a time, results in order
    protocol                  RunRequest and the JSON lines a worker writes
    stream                    the one reader of those lines (live workers and replays)
    proc, group               a worker process; one run's worker(s) to one result (ranks)
    worker                    `python -m lab.runner.worker` (cold, or `--warm`: imports first)
    zygote                    imports once, forks a fresh warm worker per run (the pool's)
    service, daemon, remote   the runner service (one per user and machine), its process, its client
    pool, admission, peaks, gpus  zygotes and warm spares; the fair queue per GPU; what a run needs; GPUs seen
    replay                    ReplayRunner: recordings played back (worker lines; the H200 runs)

Nothing here imports torch except the worker (and, through it, lab.measure).
"""
