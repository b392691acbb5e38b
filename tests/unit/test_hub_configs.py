"""The configurations docs/WORKSHOPS.md gives an instructor, loaded where they would be loaded
(issue 39): the Zero-to-JupyterHub values into KubeSpawner (each profile applied, the pod it
would start) and JupyterHub's traits; the Slurm configuration into batchspawner's SlurmSpawner
(the job script it would submit); the hub block into JupyterHub's traits (tests/tui/test_hub.py
runs it in a real hub); the MIG list against the runner's own rule. The Helm chart's schema is
not installable here: its own keys (ports, network policies) are named, not checked.
"""

from __future__ import annotations

import asyncio
import getpass
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("jupyterhub", reason="the hub extra: pip install 'memlab[hub]'")
from traitlets.config import Config  # noqa: E402

DOCS = Path(__file__).resolve().parents[2] / "docs" / "WORKSHOPS.md"
SCOPE = "access:services!service=memlab-class"
# the chart's keys under `singleuser` that become KubeSpawner traits (z2jh's hub config maps
# them so), and those that stay the chart's own
SINGLEUSER_TRAITS = {"defaultUrl": "default_url", "extraEnv": "environment",
                     "profileList": "profile_list"}
CHART_ONLY = {"singleuser": {"networkPolicy"}, "hub": {"image", "service", "networkPolicy"},
              "proxy": {"chp"}}


def _block(lang: str, first_line: str) -> str:
    for block in re.findall(rf"```{lang}\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"docs/WORKSHOPS.md has no {lang} block starting {first_line!r}")


def _values() -> dict:
    import yaml

    return yaml.safe_load(_block("yaml", "# values.yaml: GPU Memory Lab on Zero to JupyterHub"))


def _exec_config(first_line: str) -> Config:
    c = Config()
    exec(compile(_block("python", first_line), str(DOCS), "exec"), {"c": c})
    return c


def test_every_key_of_the_values_is_loaded_or_named_as_the_charts():
    values = _values()
    for section, keys in values.items():
        loaded = {"singleuser": {"image", *SINGLEUSER_TRAITS},
                  "hub": {"services", "loadRoles", "config"}}.get(section, set())
        unknown = set(keys) - loaded - CHART_ONLY.get(section, set())
        assert not unknown, f"{section}: {unknown} is neither loaded by this test nor named"


def test_the_kubernetes_profiles_give_a_gpu_and_a_mig_slice_to_the_pod(monkeypatch):
    pytest.importorskip("kubespawner", reason="test-only: jupyterhub-kubespawner")
    import kubespawner.spawner
    from kubespawner import KubeSpawner

    # KubeSpawner reads a cluster's credentials when made; nothing here talks to a cluster
    monkeypatch.setattr(kubespawner.spawner, "load_config", lambda **kw: None)

    single = _values()["singleuser"]
    image = f"{single['image']['name']}:{single['image']['tag']}"
    config = Config({"KubeSpawner": {"image": image, **{
        trait: single[key] for key, trait in SINGLEUSER_TRAITS.items()}}})
    limits = {}

    async def pod_of(profile: dict):
        spawner = KubeSpawner(_mock=True, config=config)  # traits validated here
        profiles = spawner._get_initialized_profile_list(spawner.profile_list)
        slug = next(p["slug"] for p in profiles if p["display_name"] == profile["display_name"])
        spawner.user_options = {"profile": slug}
        await spawner.load_user_options()  # the profile's overrides, validated as traits
        return spawner, await spawner.get_pod_manifest()

    for profile in single["profileList"]:
        spawner, pod = asyncio.run(pod_of(profile))
        container = pod.spec.containers[0]
        assert container.image == image and spawner.default_url == "/memlab/"
        env = {e.name: e.value for e in container.env}
        assert env["MEMLAB_CLASS_URL"].endswith("/services/memlab-class/")
        limits[profile["display_name"]] = container.resources.limits
    assert [lim.get("nvidia.com/gpu") for lim in limits.values()] == ["1", None]
    assert [lim.get("nvidia.com/mig-1g.10gb") for lim in limits.values()] == [None, "1"]


def test_the_hub_values_and_the_hub_block_give_jupyterhub_the_same_service_roles_and_group():
    # (the hub block runs in a real hub in tests/tui/test_hub.py; jupyterhub.app is not
    # imported here: with its jupyter-events it takes seconds)
    from jupyterhub import scopes
    from jupyterhub.services.service import Service

    hub = _values()["hub"]
    for name, spec in hub["services"].items():
        service = Service(name=name, **spec)  # unknown keys or wrong types raise
        assert service.managed and "--hub" in service.command
    roles = {name: role["scopes"] for name, role in hub["loadRoles"].items()}
    # the docs' jupyterhub_config.py block: the same service, roles and group
    c = _exec_config("# jupyterhub_config.py: GPU Memory Lab (")
    assert [Service(**s).name for s in c.JupyterHub.services] == list(hub["services"])
    for role in c.JupyterHub.load_roles:
        assert set(role["scopes"]) == set(roles[role["name"]]), role["name"]
    for name, role_scopes in roles.items():
        scopes._check_scopes_exist(role_scopes)  # a misspelt scope raises
        assert SCOPE in role_scopes, name  # users and their servers' tokens reach the service
    assert hub["config"]["JupyterHub"]["load_groups"] == c.JupyterHub.load_groups \
        == {"instructors": {"users": ["ada"]}}
    assert c.Spawner.environment["MEMLAB_CLASS_URL"].endswith("/services/memlab-class/")
    with pytest.raises(KeyError):
        scopes._check_scopes_exist(["acces:services!service=memlab-class"])  # it can fail


def test_the_slurm_configuration_submits_a_gpu_job_that_finds_the_class_service():
    pytest.importorskip("batchspawner", reason="test-only: batchspawner")
    from batchspawner import SlurmSpawner
    from traitlets.utils.importstring import import_item

    c = _exec_config("# jupyterhub_config.py: GPU Memory Lab on a Slurm cluster")
    assert import_item(c.JupyterHub.spawner_class) is SlurmSpawner
    me = getpass.getuser()  # batchspawner reads the user's home from the system
    user = SimpleNamespace(name=me, url=f"/user/{me}/", escaped_name=me, id=1, server=None,
                           base_url="/", settings={}, host="")
    hub = SimpleNamespace(api_url="http://hub.example.org:8081/hub/api", base_url="/hub/",
                          public_host="", url="http://hub.example.org:8081/hub/", host="")
    spawner = SlurmSpawner(config=c, user=user, hub=hub)
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    script = asyncio.run(spawner._get_batch_script(**subvars))
    assert "#SBATCH --gres=gpu:1\n" in script and "#SBATCH --partition=gpu\n" in script
    export = next(line for line in script.splitlines() if line.startswith("#SBATCH --export="))
    assert "MEMLAB_CLASS_URL" in export.split("=", 1)[1].split(",")  # the job has it
    assert spawner.get_env()["MEMLAB_CLASS_URL"].endswith("/services/memlab-class/")
    assert spawner.default_url == "/memlab/"


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_the_mig_list_is_what_the_runners_rule_says():
    from lab.serve.hub.placement import fits, markdown

    text = DOCS.read_text(encoding="utf-8")
    start = text.index("- **Every variant fits 10.00 GB**")
    shown = "\n".join(line.strip() for line in text[start:].split("\n\n", 1)[0].splitlines())
    assert shown == markdown(10 * 10**9)
    lesson_01 = next(f for f in fits(10 * 10**9) if f.lesson_id == "linear-baseline")
    assert lesson_01.fits == ["baseline", "no_grad"] and not lesson_01.too_big
