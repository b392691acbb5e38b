"""Prepare, on this machine, what the H200 command needs and cannot fetch (it has no network).

    python bench/ground_truth/prepare.py [--mirrors /work/.mirror] [--no-wheels] [--no-scripts]
        [--libraries]

1. .gt_scripts/NAME/: the public scripts of cases.SOURCES, copied from a local git mirror of
   each repository at the commit named there (`git show COMMIT:PATH`, nothing edited), and the
   tiny data they read (data.py). The mirror is the search tool's `fetch github:OWNER/NAME`.
2. .whl/: the transformers this checkout's Python runs (and regex, which it checks at import),
   as wheels for the H200's Python 3.12, so the H200 records with the version the simulator
   runs here (the H200's own is older; cases/versions/* record that one too).
   `--libraries` adds the optional libraries the zoo's scripts import (peft, pytorch-lightning,
   accelerate), at the versions installed here, so the GPU runs what sim runs here.
3. Both folders go to .git/info/exclude: the public code is never committed, only run.

Then: device `run` with carry [".gt_scripts", ".whl"] (bench/ground_truth/README.md).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import ROOT, SOURCES  # noqa: E402
from data import MAKERS  # noqa: E402

SCRIPTS, WHEELS = ROOT / ".gt_scripts", ROOT / ".whl"


def exclude(*names: str) -> None:
    path = Path(subprocess.check_output(["git", "rev-parse", "--git-path", "info/exclude"],
                                        cwd=ROOT, text=True).strip())
    path = path if path.is_absolute() else ROOT / path
    path.parent.mkdir(parents=True, exist_ok=True)
    have = path.read_text().splitlines() if path.exists() else []
    with path.open("a") as f:
        for n in names:
            if n not in have:
                f.write(n + "\n")


def copy_scripts(mirrors: Path) -> None:
    for name, src in SOURCES.items():
        git_dir = mirrors / src["repo"].replace("/", "+") / "repo"
        if not git_dir.exists():
            sys.exit(f"prepare: no mirror of {src['repo']} at {git_dir}; fetch github:{src['repo']}")
        dest = SCRIPTS / name
        dest.mkdir(parents=True, exist_ok=True)
        for out, path in src["files"].items():
            blob = subprocess.run(["git", "--git-dir", str(git_dir), "show",
                                   f"{src['commit']}:{path}"], capture_output=True)
            if blob.returncode:
                sys.exit(f"prepare: {src['repo']}@{src['commit'][:12]} has no {path} in the "
                         f"mirror ({blob.stderr.decode().strip()}); fetch it again")
            (dest / out).write_bytes(blob.stdout)
        MAKERS[name](dest)
        print(f"prepare: {src['repo']}@{src['commit'][:12]} -> {dest.relative_to(ROOT)} "
              f"({', '.join(src['files'])} + data/gt)")


LIBRARIES = ("peft", "pytorch-lightning", "accelerate")  # what zoo scripts import beside torch


def download_wheels(libraries: bool = False) -> None:
    WHEELS.mkdir(exist_ok=True)
    names = ["transformers", "regex"] + (list(LIBRARIES) if libraries else [])
    want = []
    for name in names:
        try:
            want.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            sys.exit(f"prepare: {name} is not installed here; `pip install {name}` first (the GPU "
                     "records with the version sim runs here)")
    plat = [a for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
            for a in ("--platform", p)]
    subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                           "--only-binary=:all:", "--python-version", "3.12", "--implementation",
                           "cp", *plat, "-d", str(WHEELS), *want])
    print(f"prepare: {', '.join(want)} -> {WHEELS.relative_to(ROOT)}/ "
          f"({sum(p.stat().st_size for p in WHEELS.glob('*.whl')) / 2**20:.1f} MiB)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirrors", default="/work/.mirror", type=Path)
    ap.add_argument("--no-wheels", action="store_true")
    ap.add_argument("--no-scripts", action="store_true", help="no public scripts (the zoo has none)")
    ap.add_argument("--libraries", action="store_true",
                    help="also peft, pytorch-lightning, accelerate (the zoo's scripts import them)")
    args = ap.parse_args()
    exclude("/.gt_scripts/", "/.whl/")
    if not args.no_scripts:
        copy_scripts(args.mirrors)
    if not args.no_wheels:
        download_wheels(args.libraries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
