"""Issue 34, the CLI's half: what a security test found in the commands that read a file or a
folder a person names, and in the lesson-number parser; every test here failed before the fix.

1 a FIFO hung `view`, `diff`, `class push --results`, `memlab class`; /dev/zero filled memory
  (`compare --config`, `class push --results`: MemoryError) -> one bounded reader (lab/user_files.py)
5 tracebacks: `run ¹` (and `class goto ¹`, `class show ¹`) while `run ٣` ran lesson 03;
  `compare --config` with hidden_size "big"; `serve --data FILE`, `<data>/token` a folder,
  `class --data FILE push`, `MEMLAB_HOME=FILE memlab challenge start`
6 a save killed mid-write left `.progress.jsonl.*.tmp` behind
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from lab.cli import main
from lab.user_files import UserFileError, read_user_file, usable_folder

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "tests" / "fixtures" / "reference" / "linear-baseline" / "baseline.json"


def one_line(capsys, rc: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("memlab: error: "), (rc, err)
    return err[0]


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MEMLAB_SERVED", raising=False)
    return tmp_path / "home"


# ---- 1: the bounded reader ------------------------------------------------------------------------
def test_the_reader_refuses_what_is_no_regular_file_before_opening_it(tmp_path, fifo):
    for path, says in ((fifo, "a FIFO"), ("/dev/zero", "a character device"),
                       (tmp_path, "a folder"), (tmp_path / "none", "no such file")):
        with pytest.raises(UserFileError, match=says) as e:
            read_user_file(path, 1000)
        assert "\n" not in str(e.value)
    with pytest.raises(UserFileError) as e:
        read_user_file(tmp_path / "none", 10)
    assert e.value.missing


def test_the_reader_reads_at_most_its_limit_whatever_the_file_says(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 5000)
    assert read_user_file(big, 5000) == b"x" * 5000
    with pytest.raises(UserFileError, match="more than the 4.88 KiB"):
        read_user_file(big, 4999)
    with pytest.raises(UserFileError, match="holds more than"):  # a /proc file says size 0
        read_user_file("/proc/self/maps", 10)
    bomb = tmp_path / "bomb.pkl.gz"
    bomb.write_bytes(gzip.compress(b"\0" * 2_000_000))  # 2 KB on disk
    with pytest.raises(UserFileError, match="inflates to more than"):
        read_user_file(bomb, 100_000, inflate=True)


def test_a_folder_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserFileError, match="is a file"):
        usable_folder(tmp_path / "f", "--data")
    with pytest.raises(UserFileError, match=r"cannot be a folder \(.*f is a file\)"):
        usable_folder(tmp_path / "f" / "sub", "--data")
    assert usable_folder(tmp_path / "new" / "sub", "--data") == tmp_path / "new" / "sub"


@pytest.mark.parametrize("args", [
    ["view", "{bad}"], ["diff", "{bad}", "{result}"], ["export", "{bad}", "--to", "{tmp}/out"],
    ["class", "--data", "{tmp}/ws", "push", "01", "--results", "{bad}"],
    ["compare", "--config", "{bad}", "--mode", "sim"]])
@pytest.mark.parametrize("bad", ["fifo", "/dev/zero"])
def test_every_command_that_reads_a_named_file_refuses_a_fifo_or_a_device(
        tmp_path, home, capsys, fifo, args, bad):
    # before: a FIFO hung the command forever, /dev/zero grew it until MemoryError
    path = fifo if bad == "fifo" else "/dev/zero"
    argv = [a.format(bad=path, result=RESULT, tmp=tmp_path) for a in args]
    line = one_line(capsys, main(argv))
    assert "the lab reads only regular files" in line and str(path) in line


def test_memlab_class_skips_a_progress_file_that_is_a_fifo(tmp_path, capsys, home):
    # a learner folder whose progress.jsonl is a FIFO (or /dev/zero behind a link) hung the
    # instructor's `memlab class`
    ws = tmp_path / "ws"
    for name in ("ada", "bob"):
        (ws / "learners" / name).mkdir(parents=True)
    os.mkfifo(ws / "learners" / "ada" / "progress.jsonl")
    (ws / "learners" / "bob" / "progress.jsonl").symlink_to("/dev/zero")
    assert main(["class", "--data", str(ws), "show", "01"]) == 0
    assert "ada" in capsys.readouterr().out


def test_a_progress_file_that_is_a_fifo_opens_fresh_and_is_set_aside(home):
    from lab.course.progress import Progress

    home.mkdir(parents=True)
    os.mkfifo(home / "progress.jsonl")
    p = Progress.load()  # hung before
    assert p.recovered and "FIFO" in p.recovered
    p.commit_prediction("linear-baseline", 4.0)  # saves
    assert Progress.load().lessons["linear-baseline"].prediction_gb == 4.0
    assert (home / "progress.jsonl.corrupt").exists()


# ---- 5: one line, exit 2 --------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["run", "¹"], ["class", "goto", "¹"], ["class", "show", "¹"],
                                  ["run", "٣", "--mode", "sim"]])
def test_a_lesson_number_is_ascii_digits_or_one_line(tmp_path, home, capsys, argv):
    if argv[0] == "class":
        argv = ["class", "--data", str(tmp_path / "ws"), *argv[1:]]
    line = one_line(capsys, main(argv))  # '¹': a traceback; '٣': ran lesson 03 silently
    assert "no lesson" in line and "ASCII digits" in line


def test_a_config_with_a_size_that_is_no_number_is_one_line(tmp_path, home, capsys):
    cfg = json.loads((ROOT / "assets" / "models" / "gpt2.json").read_text())
    cfg["n_embd"] = "big"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    line = one_line(capsys, main(["compare", "--config", str(tmp_path / "config.json"),
                                  "--mode", "sim"]))
    assert 'n_embd is "big"' in line and "whole number" in line


@pytest.mark.parametrize("argv, says", [
    (["serve", "--data", "{file}"], "--data {file} is a file"),
    (["class", "--data", "{file}", "push", "01", "--results", "{result}"], "--data {file} is a file"),
    (["class", "--data", "{file}"], "--data {file} is a file"),
    (["serve", "--data", "{ws}", "--host", "0.0.0.0"], "token is a folder"),
    (["serve", "--data", "{ws}", "--max-tabs", "0"], "--max-tabs"),
    (["serve", "--data", "{ws}", "--tab-modes", "gpu"], "--tab-modes: gpu"),
])
def test_a_folder_or_a_limit_that_cannot_be_is_one_line(tmp_path, home, capsys, argv, says):
    pytest.importorskip("textual_serve")
    (tmp_path / "file").write_text("x")
    (tmp_path / "ws" / "token").mkdir(parents=True)
    names = dict(file=tmp_path / "file", ws=tmp_path / "ws", result=RESULT)
    line = one_line(capsys, main([a.format(**names) for a in argv]))
    assert says.format(**names) in line


def test_memlab_home_that_is_a_file_is_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "file"))
    line = one_line(capsys, main(["challenge", "start", "halve-eval"]))
    assert "MEMLAB_HOME" in line and "is a file" in line


# ---- 6: leftovers of killed saves -----------------------------------------------------------------
def test_the_next_save_removes_the_temp_files_of_killed_saves(home):
    from lab.course.progress import Progress

    p = Progress.load()
    p.commit_prediction("linear-baseline", 1.0)
    # what SIGKILL mid-save leaves (200 kills of 4 writers left 6 of these)
    left = [home / f".progress.jsonl.k{i}xyz.tmp" for i in range(6)]
    for f in left:
        f.write_text('{"kind": "meta"')
    old = home / "results" / ".linear-baseline.json.old1.tmp"
    young = home / "results" / ".linear-baseline.json.new1.tmp"
    old.parent.mkdir()
    for f in (old, young):
        f.write_text("{")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    p.record_answer("linear-baseline", 0, 1, True, 3)  # the next save
    p.save_results("linear-baseline", [])
    assert not any(f.exists() for f in left)
    # results are written without a lock: only a temp file older than any write is a leftover
    assert not old.exists() and young.exists()
    assert sorted(f.name for f in home.iterdir() if f.is_file()) == [
        "progress.jsonl", "progress.jsonl.lock"]
