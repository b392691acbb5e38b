"""A warm worker whose variant sets its own environment restarts cold (lesson 17's
PYTORCH_CUDA_ALLOC_CONF must be set before torch reads it), keeping its pid and pipes; a simulated
run, whose allocator model reads the setting when its backend is built, keeps its warm imports."""

import json
import subprocess
import sys

import pytest

from lab.course.curriculum import load_course
from lab.runner.protocol import RunRequest

LESSON = next(l for l in load_course().lessons if any(v.env for v in l.variants))
VARIANT = next(v for v in LESSON.variants if v.env)


@pytest.mark.slow
def test_a_warm_worker_hands_an_env_variant_to_a_cold_start():
    req = RunRequest.for_lesson(LESSON, VARIANT.name, "cpu", "small", timing=False).to_json_dict()
    p = subprocess.Popen([sys.executable, "-m", "lab.runner.worker", "--warm"], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ready = json.loads(p.stdout.readline())
    assert ready["type"] == "ready"
    p.stdin.write(json.dumps({"request": req, "env": {}}) + "\n")
    p.stdin.flush()
    out, _ = p.communicate(timeout=300)
    msgs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    started = next(m for m in msgs if m["type"] == "started")
    assert started["pid"] == ready["pid"]  # the same process, exec'd: the runner's handle holds
    result = next(m for m in msgs if m["type"] == "result")["result"]
    assert result["status"] == "ok"
    name, value = next(iter(dict(VARIANT.env).items()))
    # the experiment saw the variant's environment (lesson 17 notes the setting it ran under)
    assert any(f"{name}={value}" in n for n in result["notes"]), result["notes"]


def test_a_simulated_run_keeps_its_warm_worker_for_the_allocator_settings():
    # given lesson 23's variants in sim: only the allocator model reads PYTORCH_CUDA_ALLOC_CONF,
    # when its backend is built, so a warm worker keeps its imports (no cold start)
    from lab.runner.worker import needs_cold_start

    def asked(mode, env):
        req = RunRequest.for_lesson(LESSON, VARIANT.name, mode, "seed").to_json_dict()
        return needs_cold_start({**req, "env": env})

    conf = dict(VARIANT.env)
    assert not asked("sim", conf)
    assert not asked("sim", {})
    # anything torch itself may read at import, or a run that starts CUDA, still restarts cold
    assert asked("sim", {**conf, "OMP_NUM_THREADS": "1"})
    assert asked("cpu", conf)
    assert asked("cuda", conf)
