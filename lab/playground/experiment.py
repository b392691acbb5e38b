"""The playground's generic experiment: one workload with one combination of techniques.

Run by `lab.runner.worker` like a lesson's experiment.py (RunRequest.experiment points here;
variant "combo"). `run.p` carries everything: `workload`, `techniques` (a dict), and the sizes
(batch, seq, dtype, steps, ...).
"""

from lab.playground.techniques import Techniques
from lab.playground.workloads import get_workload


def combo(run):
    workload = get_workload(run.p.workload)
    techniques = Techniques.from_dict(run.p.techniques)
    workload.check(techniques)
    workload.step_fn()(run, techniques)
