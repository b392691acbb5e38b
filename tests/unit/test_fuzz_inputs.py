"""No traceback for any file: property-based tests of every parser a person's file reaches.

The parsers behind `memlab view`, `diff`, `export`, `class push --results`, `compare --config`,
lesson.toml, challenges.toml and the progress file are fed random and mutated inputs; so are the
paths a person names (FIFOs, devices, links, folders: lab/user_files.py), the paths a served
tab's command palette names (lab/serve/policy.py), learner names, lesson numbers and the access
guard's cookies and headers (issue 34). Inputs are random and mutated (Hypothesis: fixed seeds
via `derandomize=True`, a fixed number of examples): valid files truncated, bytes flipped or
inserted, binary noise, JSON with a value anywhere replaced by another type, nested 200,000 deep,
huge numbers and strings. Each must answer with a result or ONE line naming what is wrong (exit
2 for a command), and while it reads, an audit hook (PEP 578) checks that nothing is written
(outside the folder a command was told to write to) and nothing is run: no process, no exec of
code that is no module's, no pickle global.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the test extra: pip install -e '.[test]'")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lab.cli import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
RESULT = (FIXTURES / "reference" / "linear-baseline" / "baseline.json").read_bytes()
SNAPSHOT = (FIXTURES / "h200_snapshot.pickle").read_bytes()
LESSON_DIR = ROOT / "lessons" / "01-linear-baseline"
CONFIG = (ROOT / "assets" / "models" / "gpt2.json").read_bytes()

# the suite's examples are fixed; MEMLAB_FUZZ_SCALE=20 runs twenty times as many (by hand)
SCALE = int(os.environ.get("MEMLAB_FUZZ_SCALE", "1"))
FUZZ = dict(derandomize=True, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                   HealthCheck.function_scoped_fixture])
DEEP = b"[" * 200_000 + b"]" * 200_000
# fixed cases every property starts with: nested 200,000 deep; an integer of 5,000 digits (more
# than Python reads); a number too large for a float
SPECIAL = {"deep": DEEP, "huge-int": b'{"schema": 1, "peak": ' + b"9" * 5000 + b', "timeline": {}}',
           "huge-float": b'{"schema": 1, "variant": "x", "peak": {"bytes": 1e400}}',
           # a result whole but for one float: seconds(inf) crashed the Markdown report
           "inf-step": RESULT.replace(b'"step_time_s": ', b'"step_time_s": Infinity, "_was": '),
           # well typed, but a count of 401 digits: every table and plot turns it into a float
           "big-count": RESULT.replace(b'"bytes": ', b'"bytes": 1' + b"0" * 400 + b', "_was": ', 1)}
assert SPECIAL["inf-step"] != RESULT


def special(data):
    return SPECIAL.get(data) if isinstance(data, str) else None


# ---- the watch: nothing written, nothing run (PEP 578 audit hook) -------------------------------------
_WATCH: dict = {"on": False, "allowed": (), "seen": []}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_RUN_EVENTS = ("os.system", "subprocess.Popen", "os.posix_spawn", "os.spawn", "os.exec",
               "os.fork", "os.forkpty", "pickle.find_class", "ctypes.dlopen", "socket.connect",
               "builtins.input", "webbrowser.open")
_PATH_EVENTS = ("os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.chmod", "os.truncate",
                "shutil.rmtree", "shutil.copyfile")


def _outside(path) -> bool:
    if isinstance(path, int):
        return False  # an fd opened before
    p = os.fsdecode(path)
    return not any(os.path.abspath(p).startswith(str(a)) for a in _WATCH["allowed"])


def _audit(event: str, args: tuple) -> None:
    # an audit hook outlives its module: at interpreter exit the module's globals are None
    if _WATCH is None or not _WATCH["on"]:
        return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, 0))[:3]
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) \
            else bool((flags or 0) & _WRITE_FLAGS)
        if writes and _outside(path):
            _WATCH["seen"].append(f"write {path}")
    elif event in _PATH_EVENTS and args and _outside(args[0]):
        _WATCH["seen"].append(f"{event} {args[0]}")
    elif event.startswith(_RUN_EVENTS):
        _WATCH["seen"].append(f"{event} {args[:1]}")
    elif event == "exec":  # code run (compile alone is not: the lab parses formulas with ast)
        name = getattr(args[0], "co_filename", "")
        if name.startswith("<") and not name.startswith("<frozen"):
            _WATCH["seen"].append(f"exec of {name}")


sys.addaudithook(_audit)  # (hooks cannot be removed: it does nothing unless a watch is on)


@contextlib.contextmanager
def watch(*allowed: Path):
    _WATCH.update(on=True, allowed=tuple(os.path.abspath(a) for a in allowed), seen=[])
    try:
        yield _WATCH["seen"]
    finally:
        _WATCH["on"] = False


def test_the_watch_sees_a_write_a_process_and_code_from_a_string(tmp_path):
    # the checks below are only as good as this hook: it must see each kind of thing
    with watch(tmp_path / "allowed") as seen:
        (tmp_path / "allowed").mkdir()
        (tmp_path / "allowed" / "ok.txt").write_text("fine")
        (tmp_path / "written.txt").write_text("not fine")
        os.system("true")
        exec(compile("x = 1", "<string>", "exec"), {})
        pickle.loads(pickle.dumps(Path("x")))  # the standard unpickler resolves a global
    assert [s.split(" ")[0] for s in seen] == ["write", "os.system", "exec", "pickle.find_class"]


def cli(*args) -> tuple[int, str]:
    """`memlab ARGS` in this process: (exit code, stderr). An exception is a failed test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args])
    return rc, err.getvalue()


def assert_one_line(rc: int, err: str, ok=(0,)) -> None:
    assert rc in (*ok, 2), (rc, err)
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memlab: error: "), err
        assert len(lines[0]) < 600, lines[0][:200]


# ---- inputs: random, and mutated valid files ------------------------------------------------------------
BIG_INTS = st.sampled_from([2**63, -(2**63) - 1, 10**30, int("9" * 400)])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), BIG_INTS,
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.sampled_from(["", "../../x", "a/b", "\x00", "💥" * 40, "x" * 5000]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def _paths(obj, prefix=()):
    yield prefix
    if len(prefix) > 12:
        return  # (a value wrapped thousands deep by an earlier change)
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):  # long timelines: their first entries stand for the rest
            yield from _paths(v, prefix + (i,))


def _replace(obj, path, value):
    if not path:
        return value
    obj[path[0]] = _replace(obj[path[0]], path[1:], value)
    return obj


def mutate_structure(data, obj):
    """Replace, delete or deeply wrap one value anywhere in a JSON-like structure."""
    paths = list(_paths(obj))
    path = data.draw(st.sampled_from(paths), label="where")
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "wrap"]), label="op")
    if op == "delete" and path:
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        return obj
    if op == "wrap":
        node = obj
        for key in path:
            node = node[key]
        deep = node
        for _ in range(data.draw(st.sampled_from([50, 900, 5000]), label="depth")):
            deep = [deep]
        return _replace(obj, path, deep)
    return _replace(obj, path, data.draw(VALUES, label="value"))


def mutate_bytes(data, raw: bytes) -> bytes:
    op = data.draw(st.sampled_from(["truncate", "flip", "insert", "repeat", "noise"]), label="op")
    if op == "noise":
        return data.draw(st.binary(max_size=3000), label="noise")
    i = data.draw(st.integers(0, len(raw)), label="at")
    if op == "truncate":
        return raw[:i]
    if op == "flip":
        n = data.draw(st.integers(1, 8), label="n")
        return raw[:i] + data.draw(st.binary(min_size=n, max_size=n), label="bytes") + raw[i + n:]
    if op == "insert":
        return raw[:i] + data.draw(st.binary(max_size=64), label="bytes") + raw[i:]
    j = data.draw(st.integers(i, min(len(raw), i + 200)), label="to")
    return raw[:j] + raw[i:j] * data.draw(st.integers(2, 50), label="times") + raw[j:]


def mutated_json(data, raw: bytes) -> bytes:
    if data.draw(st.booleans(), label="structure"):
        obj = json.loads(raw)
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            obj = mutate_structure(data, obj)
        try:
            return json.dumps(obj).encode()
        except (ValueError, RecursionError):
            return DEEP
    return mutate_bytes(data, raw)


def mutated_pickle(data, raw: bytes) -> bytes:
    if data.draw(st.booleans(), label="structure"):
        obj = mutate_structure(data, pickle.loads(raw))
        try:
            return pickle.dumps(obj, protocol=data.draw(st.sampled_from([2, 4]), label="proto"))
        except (RecursionError, ValueError):
            return b"\x80\x04\x95" + b"\xff" * 8
    return mutate_bytes(data, raw)


# ---- view, diff, export, class push --results ---------------------------------------------------------------
@pytest.fixture(scope="module")
def warmed(tmp_path_factory):
    """Every command run once on a valid file, so the lazy imports are done before any watch."""
    tmp = tmp_path_factory.mktemp("warm")
    (tmp / "r.json").write_bytes(RESULT)
    (tmp / "s.pickle").write_bytes(SNAPSHOT)
    for args in (["view", tmp / "r.json"], ["view", tmp / "s.pickle"],
                 ["diff", tmp / "r.json", tmp / "s.pickle"],
                 ["export", tmp / "r.json", "--to", tmp / "out"],
                 ["class", "--data", tmp / "ws", "push", "01", "--results", tmp / "r.json"]):
        rc, err = cli(*args)
        assert rc == 0, err
    cli("view", tmp / "missing.json")
    return tmp


@pytest.mark.slow  # seconds: every example renders the text and the plot
@settings(max_examples=25 * SCALE, **FUZZ)
@given(st.data())
@example(data="deep")
@example(data="huge-int")
@example(data="huge-float")
@example(data="inf-step")
@example(data="big-count")
def test_view_and_diff_of_any_file_answer_in_one_line_and_run_nothing(warmed, tmp_path_factory,
                                                                      data):
    tmp = tmp_path_factory.mktemp("view")
    if special(data):
        raw, name = special(data), "special.json"
    elif data.draw(st.booleans(), label="pickle"):
        raw, name = mutated_pickle(data, SNAPSHOT), "s.pickle"
    else:
        raw, name = mutated_json(data, RESULT), "r.json"
    (tmp / name).write_bytes(raw)
    with watch() as seen:
        assert_one_line(*cli("view", tmp / name))
        assert_one_line(*cli("diff", warmed / "r.json", tmp / name))
    assert seen == []


@pytest.mark.slow  # seconds: every example writes a report and pushes a class run
@settings(max_examples=12 * SCALE, **FUZZ)
@given(st.data())
@example(data="deep")
@example(data="huge-int")
@example(data="huge-float")
@example(data="inf-step")
@example(data="big-count")
def test_export_and_class_push_of_any_file_write_only_where_told(warmed, tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("export")
    raw = special(data) or mutated_json(data, RESULT)
    (tmp / "r.json").write_bytes(raw)
    with watch(tmp / "out", tmp / "ws") as seen:
        rc, err = cli("export", tmp / "r.json", "--to", tmp / "out")
        assert_one_line(rc, err)
        if rc == 2:
            assert not (tmp / "out").exists()
        rc, err = cli("class", "--data", tmp / "ws", "push", "01", "--results", tmp / "r.json")
        assert_one_line(rc, err, ok=(0, 1))
        if rc == 2:
            assert not (tmp / "ws" / "class").exists()
    assert seen == []
    if rc in (0, 1):  # a pushed run is what every learner's app plays back: it reads back whole
        from lab.serve.classroom import Classroom

        assert Classroom(tmp / "ws").pushed("linear-baseline")


def test_a_pickle_that_asks_to_run_a_command_is_refused_before_anything_runs(tmp_path):
    canary = tmp_path / "canary"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {canary}",))

    (tmp_path / "warm.pickle").write_bytes(pickle.dumps(Evil()))
    cli("view", tmp_path / "warm.pickle")  # the lazy imports of this path, outside the watch
    for protocol in (0, 2, 4):
        path = tmp_path / f"evil{protocol}.pickle"
        path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Evil()]]},
                                      protocol=protocol))
        with watch() as seen:
            rc, err = cli("view", path)
        # protocols 2 and 4 open like a snapshot and are refused at the global they name;
        # protocol 0 does not even look like one
        assert rc == 2 and ("refused: it asks for" in err and "system`" in err
                            or protocol == 0 and "neither a pickle nor JSON" in err), err
        assert seen == [] and not canary.exists()


# ---- --config, lesson.toml, the progress file ------------------------------------------------------------------
@settings(max_examples=25 * SCALE, **FUZZ)
@given(st.data())
@example(data="deep")
@example(data="huge-int")
def test_a_model_config_is_read_or_one_line(tmp_path_factory, data):
    from lab.workloads.hf_config import ConfigError, default_seq, read_config

    path = tmp_path_factory.mktemp("config") / "config.json"
    path.write_bytes(special(data) or mutated_json(data, CONFIG))
    with watch() as seen:
        try:
            default_seq(read_config(path))  # what `compare --config` reads before anything runs
        except ConfigError as e:
            assert "\n" not in str(e) and len(str(e)) < 600
    assert seen == []


TOML_VALUES = ['"soon"', "[]", "{}", "-1", "0", "1e400", "inf", "nan", "true", '"x"',
               '[1, "a"]', "{ a = 1 }", "99999999999999999999999", '"' + "9" * 400 + '"',
               "[[1]]", '"../../etc"', "1979-05-27", '""', "0.5", "[{}]"]


def mutated_toml(data, text: str) -> bytes:
    if data.draw(st.booleans(), label="value"):
        lines = text.splitlines()
        assigned = [i for i, line in enumerate(lines) if " = " in line and not line.startswith("#")]
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            i = data.draw(st.sampled_from(assigned), label="line")
            key = lines[i].split(" = ", 1)[0]
            value = data.draw(st.sampled_from(TOML_VALUES), label="toml value")
            lines[i] = f"{key} = {value}"
        return "\n".join(lines).encode()
    return mutate_bytes(data, text.encode())


@pytest.fixture(scope="module")
def lesson_copy(tmp_path_factory):
    from lab.course.curriculum import load_lesson

    folder = tmp_path_factory.mktemp("lessons") / LESSON_DIR.name
    folder.mkdir()
    for f in LESSON_DIR.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    load_lesson(folder)  # warm
    return folder


@settings(max_examples=40 * SCALE, **FUZZ)
@given(st.data())
def test_a_lesson_toml_is_a_lesson_or_one_line(lesson_copy, data):
    from lab.course.curriculum import LessonError, load_lesson

    (lesson_copy / "lesson.toml").write_bytes(
        mutated_toml(data, (LESSON_DIR / "lesson.toml").read_text()))
    with watch() as seen:
        try:
            load_lesson(lesson_copy)
        except LessonError as e:
            assert "\n" not in str(e) and len(str(e)) < 800
    assert seen == []


@pytest.fixture(scope="module")
def progress_seed(tmp_path_factory) -> bytes:
    """A progress file as the app writes it: a prediction, two answers, a run, a reveal."""
    from lab.course.progress import Progress
    from lab.course.reference import load_reference

    p = Progress.load(tmp_path_factory.mktemp("seed") / "progress.jsonl")
    p.commit_prediction("linear-baseline", 4.4)
    p.record_answer("linear-baseline", 0, 1, True, 3)
    p.record_answer("linear-baseline", 2, 4.4, True, 3)
    p.record_run(load_reference("linear-baseline")["baseline"])
    p.reveal("linear-baseline", 4.4, "H200 recording")
    return p.path.read_bytes()


@settings(max_examples=30 * SCALE, **FUZZ)
@given(st.data())
@example(data="deep")
@example(data="huge-int")
def test_a_progress_file_always_loads_keeping_what_is_readable(tmp_path_factory, progress_seed,
                                                               data):
    from lab.course.progress import Progress, parse

    folder = tmp_path_factory.mktemp("progress")
    seed = progress_seed
    if special(data):
        raw = seed + b"\n" + special(data)
    elif data.draw(st.booleans(), label="per line"):
        lines = seed.splitlines()
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        lines[i] = mutated_json(data, lines[i])
        raw = b"\n".join(lines)
    else:
        raw = mutate_bytes(data, seed)
    (folder / "progress.jsonl").write_bytes(raw)
    text = raw.decode("utf-8", "replace")
    with watch() as seen:
        state, bad = parse(text)  # the class view's reader: never repairs, never raises
    assert seen == []
    for lp in state.lessons.values():  # what it keeps is what the app and the class view use
        assert lp.prediction_gb is None or 0 <= lp.prediction_gb <= 100_000
        assert all(isinstance(a.answer, (int, float)) and abs(a.answer) <= 100_000
                   for a in lp.quiz.values())
        assert all(k.isdigit() for k in lp.quiz)  # the quiz restores answers by int(key)
        json.dumps(lp.to_record(), allow_nan=False)
    with watch(folder) as seen:
        loaded = Progress.load(folder / "progress.jsonl")  # repairs in its own folder only
    assert seen == []
    assert bool(loaded.recovered) == bool(bad) or loaded.recovered.startswith("could not read")


# ---- issue 34: paths a person names, a served tab's palette, challenges.toml, names, the guard -------
PATH_KINDS = ["regular", "regular", "fifo", "dir", "missing", "link-to-zero", "link-to-fifo",
              "link-loop", "nul", "long", "empty"]


def _named_path(data, folder: Path) -> str:
    """A path of some kind, made in `folder`: what a person may type where a file is asked."""
    kind = data.draw(st.sampled_from(PATH_KINDS), label="kind")
    p = folder / f"f{len(list(folder.iterdir()))}.json"
    if kind == "regular":
        p.write_bytes(mutated_json(data, RESULT) if data.draw(st.booleans(), label="json")
                      else mutated_pickle(data, SNAPSHOT))
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "dir":
        p.mkdir()
    elif kind == "link-to-zero":
        p.symlink_to("/dev/zero")
    elif kind == "link-to-fifo":
        if not (folder / "pipe").exists():
            os.mkfifo(folder / "pipe")
        p.symlink_to(folder / "pipe")
    elif kind == "link-loop":
        p.symlink_to(p)
    elif kind == "nul":
        return str(p) + "\0x"
    elif kind == "long":
        return str(folder / ("x" * 300))
    return str(p)


@settings(max_examples=30 * SCALE, **FUZZ)
@given(st.data())
def test_any_named_path_is_read_bounded_or_refused_in_one_line(tmp_path_factory, data):
    # every reader a command hands a typed path: never a hang (FIFO), never unbounded (/dev/zero)
    from lab.snapshots.load import SnapshotError, read
    from lab.user_files import RESULT_LIMIT, UserFileError, read_user_file
    from lab.workloads.hf_config import ConfigError, read_config

    folder = tmp_path_factory.mktemp("named")
    path = _named_path(data, folder)
    with watch() as seen:
        for reader, errors in ((lambda p: read_user_file(p, RESULT_LIMIT), UserFileError),
                               (read, SnapshotError), (read_config, ConfigError)):
            try:
                reader(path)
            except errors as e:
                assert "\n" not in str(e) and len(str(e)) < 600, str(e)
    assert seen == []


@pytest.fixture(scope="module")
def served_home(tmp_path_factory):
    from lab.snapshots.diff import diff_files

    home = tmp_path_factory.mktemp("served-home")
    (home / "mine.json").write_bytes(RESULT)
    diff_files(str(home / "mine.json"), str(home / "mine.json"))  # lazy imports, before a watch
    return home


NAMED = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["/dev/zero", "/etc/passwd", "../../etc/shadow", "mine.json", "~/.ssh/id_rsa",
                     "/proc/self/environ", "../" * 40 + "x", "link", "\x00", ".", "..", "/tmp",
                     "pipe", "mine.json/..", "./mine.json"]))


@settings(max_examples=40 * SCALE, **FUZZ)
@given(a=NAMED, b=NAMED)
def test_a_served_tabs_palette_opens_nothing_outside_the_learners_folder(served_home, monkeypatch,
                                                                        a, b):
    # what "Diff two runs" does with the two paths a learner types in a served tab
    # (diff_view.py): policy.allowed_path for each, then the diff reads them, bounded
    from lab.serve.policy import Refused, allowed_path
    from lab.snapshots import SnapshotError
    from lab.snapshots.diff import diff_files

    monkeypatch.setenv("MEMLAB_HOME", str(served_home))
    monkeypatch.setenv("MEMLAB_SERVED", "1")
    if not (served_home / "link").exists():
        (served_home / "link").symlink_to("/etc/passwd")
        os.mkfifo(served_home / "pipe")
    home = served_home.resolve()
    try:
        pa, pb = allowed_path(a), allowed_path(b)
    except Refused as e:
        assert "\n" not in str(e)
        return
    assert pa.is_relative_to(home) and pb.is_relative_to(home)  # resolved: links followed
    with watch() as seen:
        try:
            diff_files(str(pa), str(pb))
        except (SnapshotError, OSError) as e:
            assert "\n" not in str(e)
    assert seen == []


CHALLENGES_DIR = ROOT / "lessons" / "25-memory-budget"
CHALLENGE_VALUES = TOML_VALUES + ['"../../../../etc/passwd"', '"/etc/hostname"', '"a/b"',
                                  '"lesson.toml"', '"challenges/../experiment.py"', "5",
                                  '{ "metric:x" = "1" }', '{ "peak" = true }', '"Ab-C"']


@pytest.fixture(scope="module")
def challenge_lesson(tmp_path_factory):
    import shutil

    from lab.course.curriculum import load_lesson

    folder = tmp_path_factory.mktemp("challenge-lessons") / CHALLENGES_DIR.name
    shutil.copytree(CHALLENGES_DIR, folder)
    return load_lesson(folder)


@settings(max_examples=40 * SCALE, **FUZZ)
@given(st.data())
def test_a_challenges_toml_is_challenges_inside_their_lesson_or_one_line(challenge_lesson, data):
    from lab.course.challenges import ID_RE, ChallengeError, load_challenges

    text = (CHALLENGES_DIR / "challenges.toml").read_text()
    if data.draw(st.booleans(), label="value"):
        lines = text.splitlines()
        assigned = [i for i, line in enumerate(lines) if " = " in line and not line.startswith("#")]
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            i = data.draw(st.sampled_from(assigned), label="line")
            lines[i] = f"{lines[i].split(' = ', 1)[0]} = " \
                       f"{data.draw(st.sampled_from(CHALLENGE_VALUES), label='toml value')}"
        raw = "\n".join(lines).encode()
    else:
        raw = mutate_bytes(data, text.encode())
    (challenge_lesson.path / "challenges.toml").write_bytes(raw)
    folder = challenge_lesson.path.resolve()
    with watch() as seen:
        try:
            loaded = load_challenges(challenge_lesson)
        except ChallengeError as e:
            assert "\n" not in str(e) and len(str(e)) < 800
            loaded = []
    assert seen == []
    for ch in loaded:  # what loads is safe to use: a slug names the copy, the file is the lesson's
        assert ID_RE.fullmatch(ch.id) and ch.file.is_relative_to(folder)
        assert ch.file.suffix == ".py" and ch.file.is_file()
        assert not any(n.startswith("metric:") for n, _ in ch.goal.equal + ch.goal.at_most
                       + ch.goal.at_least)


@settings(max_examples=200 * SCALE, **FUZZ)
@given(raw=st.text(max_size=80))
@example(raw="李雷")
@example(raw="Иван")
@example(raw="a\u202eb\u200d\x00")
def test_a_learner_name_is_one_safe_folder_in_any_alphabet(raw):
    import unicodedata

    from lab.serve.identity import Identity
    from lab.serve.workshop import NAME_MAX, checked_name, sanitize_name

    try:
        name = sanitize_name(raw)
    except ValueError as e:
        assert "\n" not in str(e)
        return
    assert sanitize_name(name) == name == checked_name(name)  # a fixpoint: cookies check it
    assert 0 < len(name) <= NAME_MAX and len(name.encode()) <= 4 * NAME_MAX
    assert name not in (".", "..") and not name.startswith((".", "-", "_"))
    assert all(unicodedata.category(ch)[0] in "LNM" or ch in "-_" for ch in name)
    ident = Identity(Path("/nonexistent"), b"k" * 32)
    ident.code_of = lambda n: "CODE2345"  # claimed (no folder needed for the signature)
    cookie = ident.learner_cookie(name)
    assert cookie.isascii() and ident.learner_of(cookie) == name


@settings(max_examples=100 * SCALE, **FUZZ)
@given(ref=st.one_of(st.text(max_size=12), st.sampled_from(["¹", "٣", "３", "03", "3", " 3 ",
                                                            "0" * 20 + "3", "1e1", "-1"])))
def test_a_lesson_reference_is_a_lesson_or_one_line(ref):
    from lab.course.curriculum import lesson_number

    course = _course()
    try:
        lesson = course.find(ref)
    except LookupError as e:
        assert "\n" not in str(e)
        return
    n = lesson_number(ref)
    assert ref.strip() in (lesson.id, lesson.slug) or (n == lesson.number and ref.strip().isascii())


_COURSE: list = []


def _course():
    from lab.course.curriculum import load_course

    if not _COURSE:
        _COURSE.append(load_course())
    return _COURSE[0]


GUARD_VALUES = st.one_of(st.text(max_size=40), st.sampled_from(
    ["¹.a.b", "٣.x.y", "1.2", "..", "9" * 300 + ".a.b", "1" * 13 + ".a.b", "%ff.x", "a.%00",
     "null", "http://", "http://[::1", "file://", "http://evil.example", "cross-site"]))


@settings(max_examples=60 * SCALE, **FUZZ)
@given(cookie=GUARD_VALUES, learner=GUARD_VALUES, origin=GUARD_VALUES, fetch=GUARD_VALUES,
       method=st.sampled_from(["GET", "POST"]))
def test_the_access_guard_answers_any_header_without_raising(cookie, learner, origin, fetch,
                                                            method):
    # a cookie that broke a parser was a 500 whose logged traceback held the token
    pytest.importorskip("aiohttp")
    from aiohttp.test_utils import make_mocked_request
    from multidict import CIMultiDict

    from lab.serve.auth import Guard
    from lab.serve.identity import Identity

    guard = Guard("tok", Identity(Path("/nonexistent"), b"k" * 32))
    headers = CIMultiDict({"Host": "127.0.0.1:8000", "Origin": origin, "Sec-Fetch-Site": fetch,
                           "Referer": origin})
    try:
        headers["Cookie"] = f"memlab_session={cookie}; memlab_learner={learner}"
    except ValueError:
        pass
    request = make_mocked_request(method, "/", headers=headers)
    try:
        refusal = guard.check(request)
    except Exception as e:  # only the redirect that takes the token out of the address bar
        from aiohttp import web

        assert isinstance(e, web.HTTPSeeOther)
        return
    assert refusal is not None and refusal.status == 403  # no token, no signed session
    assert guard.identity.learner_of(learner) is None
