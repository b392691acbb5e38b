"""In-process `memlab profile --mode sim --gpu G -- python SCRIPT ARGS`, then RSS and time."""
import resource, sys, time
t0 = time.perf_counter()
import overrides  # noqa: F401  (the prototype's meta overrides, when MEMLAB_PROTO_OVERRIDES=1)
from lab.measure.backends import backend_for
from lab.measure.measure import VariantSpec, measure
from lab.profile import script as experiment
from lab.profile.run import finish, parse_command
from lab.measure.sim.gpus import gpu as card
t_import = time.perf_counter() - t0
g, script, args = sys.argv[1], sys.argv[2], sys.argv[3:]
params = {"target": script, "module": False, "args": args, "timeout_s": 0, "output_path": None,
          "steps": None, "gpu": g}
t1 = time.perf_counter()
r = measure(experiment.script,
            VariantSpec("profile", "script", "", params, timing=False),
            backend_for("sim", gpu=card(g)))
r = finish(r, parse_command(["python", script, *args]), [], 0)
a = r.allocator
print(f"RESULT status={r.status} error={(r.error or '')[:300]!r} alloc={a.peak_allocated_bytes if a else None} "
      f"reserved={a.peak_reserved_bytes if a else None} run_s={time.perf_counter()-t1:.1f} import_s={t_import:.1f} "
      f"maxrss_GiB={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/2**20:.2f}")
for n in r.notes:
    if "raised" in n: print("NOTE", n[:300])
