"""The defects a security and fault test of `memlab serve` and the CLI found (issue 24), one test
(or a few) each; every one of them failed before the fix.

1 DNS rebinding past the loopback guard    5 names from a results file became paths
2 a prediction of 400 nines (inf)          6 tracebacks for a corrupt pickle, deep JSON, a bad lesson.toml
4 an Origin with no host                   7 identity was a name: unsigned cookie, login by GET, no cap,
8 a wrong prediction missing from the        the raw token in a cookie
  class's summary                          (3, tabs outliving a killed server: test_serve_lifeline.py)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from lab.cli import main
from lab.course.curriculum import load_course
from lab.course.progress import Progress
from lab.course.reference import load_reference
from lab.serve.workshop import is_loopback

ROOT = Path(__file__).resolve().parents[2]
LESSON = "linear-baseline"
TOKEN = "hardening-token"

aiohttp = pytest.importorskip("aiohttp", reason="the serve extra: pip install 'memlab[serve]'")
pytest.importorskip("textual_serve", reason="the serve extra: pip install 'memlab[serve]'")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from lab.serve.server import LabServer  # noqa: E402


async def _client(root: Path, token: str | None = None, **kw):
    server = LabServer(root, "0.0.0.0" if token else "127.0.0.1", 8000, token,
                       say=lambda text: None, **kw)
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    return server, client


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


# ---- 1: the loopback guard reads addresses, not text --------------------------------------------
@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.5.6.7", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("LocalHost", True),
    ("127.0.0.1.evil.example", False), ("127.evil.example", False), ("localhost.evil.example", False),
    ("evil.example", False), ("0.0.0.0", False), ("", False)])
def test_loopback_is_an_address_or_localhost(host, loopback):
    assert is_loopback(host) is loopback


async def test_a_rebound_name_that_starts_with_127_is_refused(tmp_path):
    _, client = await _client(tmp_path)
    try:
        resp = await client.get("/", headers={"Host": "127.0.0.1.evil.example:8000"})
        assert resp.status == 403
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws", headers={
                "Host": "127.0.0.1.evil.example:8000",
                "Origin": "http://127.0.0.1.evil.example:8000",
                "Cookie": "memlab_learner=mallory"})
        assert e.value.status == 403
    finally:
        await client.close()
    assert not (tmp_path / "learners" / "mallory").exists()


# ---- 4: an Origin must name this server's host ---------------------------------------------------
@pytest.mark.parametrize("origin", ["null", "file://", "file:///home/x/page.html", "http://",
                                    "http://evil.example", "chrome-extension://abc"])
@pytest.mark.parametrize("token", [None, TOKEN])
async def test_a_websocket_from_an_origin_without_this_host_is_refused(tmp_path, origin, token):
    _, client = await _client(tmp_path, token)
    try:
        if token:
            await client.get(f"/?token={TOKEN}")
        resp = await client.post("/learner", data={"name": "ada"}, allow_redirects=False)
        assert resp.status == 303  # signed in (no Origin: not a browser's cross-site post)
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws", headers={"Origin": origin})
        assert e.value.status == 403
        # the name form cannot be posted from there either (login CSRF)
        resp = await client.post("/learner", data={"name": "eve"}, headers={"Origin": origin},
                                 allow_redirects=False)
        assert resp.status == 403
    finally:
        await client.close()
    assert not (tmp_path / "learners" / "eve").exists()


# ---- 2: a prediction is a finite number in range, on the way in and read back -------------------
@pytest.mark.parametrize("typed", ["9" * 400, "1e300", "inf", "nan", "-1", "4.4.4", ""])
def test_a_prediction_that_is_no_number_is_refused_and_nothing_is_committed(typed):
    p = Progress.load()
    with pytest.raises(ValueError):
        p.commit_prediction(LESSON, typed)
    with pytest.raises(ValueError):
        p.commit_prediction(LESSON, float("inf"))
    assert Progress.load().lessons.get(LESSON) is None or \
        Progress.load().lessons[LESSON].prediction_gb is None


def test_a_size_of_400_nines_is_one_line():
    from lab.report.units import parse_size

    with pytest.raises(ValueError) as e:
        parse_size("9" * 400 + "GB")
    assert len(str(e.value)) < 200


def _write_progress(path: Path, prediction: str, answer: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '{"kind":"meta","version":1,"last_lesson":"linear-baseline"}\n'
        '{"kind":"lesson","id":"linear-baseline","runs":1,"quiz":{"2":{"answer":' + answer
        + ',"correct":false},"x":{"answer":0,"correct":true}},"quiz_total":3,"prediction_gb":'
        + prediction + '}\n')


def test_an_infinite_prediction_on_disk_is_shown_as_invalid_and_crashes_nothing(tmp_path, capsys):
    # Given a class where one learner's file holds the prediction of 400 nines (as main wrote it)
    root = tmp_path / "ws"
    _write_progress(root / "learners" / "mallory" / "progress.jsonl", "Infinity", "Infinity")
    good = Progress.load(root / "learners" / "ada" / "progress.jsonl")
    good.commit_prediction(LESSON, 4.4)
    # Then the instructor's view, its export and the learner's own loader all work
    assert main(["class", "--data", str(root), "show", "01"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("mallory") and "invalid" in line for line in out.splitlines())
    assert "predicted peaks (GB)" in out  # the histogram of the valid ones
    assert main(["class", "--data", str(root), "export", "01", "--to", str(tmp_path / "out")]) == 0
    csv_text = (tmp_path / "out" / "class.csv").read_text()
    assert "inf" not in csv_text.lower().replace("invalid", "")
    assert ",invalid," in csv_text
    p = Progress.load(root / "learners" / "mallory" / "progress.jsonl")
    lp = p.lessons[LESSON]
    assert lp.prediction_gb is None and lp.quiz == {} and lp.runs == 1  # "x" is no question
    assert "invalid value" in p.recovered and (root / "learners" / "mallory"
                                               / "progress.jsonl.corrupt").exists()
    assert "Infinity" not in (root / "learners" / "mallory" / "progress.jsonl").read_text()


# ---- 5: names from a file never become paths unchecked ----------------------------------------------
@pytest.mark.parametrize("name, safe", [("../../../../ESCAPED_baseline", False), ("a/b", False),
                                        (".hidden", False), ("UPPER", False), ("", False),
                                        ("x" * 33, False), (7, False), ("no_grad", True),
                                        ("bf16-autocast", True)])
def test_names_from_files_must_be_safe_file_names_already(name, safe):
    from lab.serve.workshop import checked_name

    if safe:
        assert checked_name(name) == name
    else:
        with pytest.raises(ValueError):
            checked_name(name)


@pytest.mark.parametrize("variant", ["../../../../ESCAPED_baseline", "a/b"])
def test_class_push_refuses_a_variant_name_that_is_no_safe_file_name(tmp_path, capsys, variant):
    runs = [r.to_dict() for r in load_reference(LESSON).values()]
    runs[0]["variant"] = variant
    (tmp_path / "r.json").write_text(json.dumps(runs))
    root = tmp_path / "a" / "b" / "ws"
    assert main(["class", "--data", str(root), "push", "01", "--results",
                 str(tmp_path / "r.json")]) == 2
    assert "not a safe file name" in _one_error_line(capsys)
    assert not [p for p in tmp_path.rglob("*") if "ESCAPED" in p.name or p.name == "b.json"]
    assert not (root / "class" / "runs").exists()


@pytest.mark.parametrize("command", [["run", "01"], ["compare", "mlp"], ["profile"]])
@pytest.mark.parametrize("seconds", ["nan", "inf", "1e400", "-1", "9" * 400])
def test_a_timeout_goes_through_the_one_number_parser(capsys, command, seconds):
    with pytest.raises(SystemExit) as e:
        main([*command, "--timeout", seconds])
    assert e.value.code == 2
    assert "argument --timeout:" in _one_error_line(capsys)


# ---- 6: one line and exit 2, never a traceback -------------------------------------------------------
def test_view_of_a_pickle_with_an_impossible_frame_length_is_one_line(tmp_path, capsys):
    bad = tmp_path / "frame.pkl"
    bad.write_bytes(b"\x80\x04\x95" + b"\xff" * 8 + b".")
    assert main(["view", str(bad)]) == 2
    assert "not a readable pickle" in _one_error_line(capsys)


@pytest.mark.parametrize("command", [["view", "{f}"], ["diff", "{f}", "{f}"],
                                     ["export", "{f}", "--to", "{out}"],
                                     ["class", "--data", "{ws}", "push", "01", "--results", "{f}"]])
def test_json_nested_200000_deep_is_one_line(tmp_path, capsys, command):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    args = [a.format(f=deep, out=tmp_path / "out", ws=tmp_path / "ws") for a in command]
    assert main(args) == 2
    assert "too deep" in _one_error_line(capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "ws" / "class").exists()


def test_a_lesson_toml_with_a_timeout_of_soon_breaks_that_lesson_alone(tmp_path, monkeypatch, capsys):
    lessons = tmp_path / "lessons"
    for name in ("01-linear-baseline", "02-forward-backward"):
        shutil.copytree(ROOT / "lessons" / name, lessons / name)
    toml = lessons / "01-linear-baseline" / "lesson.toml"
    text, n = re.subn(r"(?m)^timeout_s = .*$", 'timeout_s = "soon"', toml.read_text())
    assert n == 1
    toml.write_text(text)
    monkeypatch.setenv("MEMLAB_LESSONS_DIR", str(lessons))
    course = load_course()
    assert [l.number for l in course.lessons] == [2]
    assert "timeout_s" in str(course.errors[0]) and "'soon'" in str(course.errors[0])
    assert main(["list", "--json"]) == 0
    capsys.readouterr()
    assert main(["run", "01", "--mode", "sim"]) == 2
    assert "timeout_s: 'soon' is not a number" in _one_error_line(capsys)


# ---- 7: identity fit for a classroom ------------------------------------------------------------------
async def test_a_learner_cookie_written_by_hand_is_no_sign_in(tmp_path):
    _, client = await _client(tmp_path)
    try:
        await client.post("/learner", data={"name": "ada"})  # ada exists
        client.session.cookie_jar.clear()
        page = await (await client.get("/", headers={"Cookie": "memlab_learner=ada"})).text()
        assert 'name="name"' in page  # the name form again, not ada's app
        with pytest.raises(aiohttp.WSServerHandshakeError) as e:
            await client.ws_connect("/ws", headers={"Cookie": "memlab_learner=ada"})
        assert e.value.status == 403
    finally:
        await client.close()


async def test_a_get_never_signs_a_browser_in(tmp_path):
    _, client = await _client(tmp_path)
    try:
        resp = await client.get("/learner?name=victim", allow_redirects=False)
        assert resp.status in (200, 405) and "Set-Cookie" not in resp.headers
    finally:
        await client.close()
    assert not (tmp_path / "learners" / "victim").exists()


async def test_a_claimed_name_needs_the_code_the_first_browser_got(tmp_path):
    server, client = await _client(tmp_path)
    try:
        resp = await client.post("/learner", data={"name": "Ada"}, allow_redirects=False)
        assert resp.status == 303
        code = server.identity.code_of("ada")
        assert code and f"MEMLAB_LEARNER_CODE={code[:4]}-{code[4:]}" in server.tab_command("ada")
        first = resp.cookies["memlab_learner"].value
        # another browser: the name alone is not enough
        client.session.cookie_jar.clear()
        resp = await client.post("/learner", data={"name": "ada"}, allow_redirects=False)
        assert resp.status == 200 and "in use in another browser" in await resp.text()
        assert "memlab_learner" not in resp.cookies
        resp = await client.post("/learner", data={"name": "ada", "code": "WRONGCOD"},
                                 allow_redirects=False)
        assert resp.status == 200
        # with the code (as a person types it), it is
        resp = await client.post("/learner", data={"name": "ada", "code": f" {code[:4].lower()}-"
                                                                         f"{code[4:]} "},
                                 allow_redirects=False)
        assert resp.status == 303 and resp.cookies["memlab_learner"].value == first
        # the instructor releases the name: the old cookies stop working, a new claim works
        assert main(["class", "--data", str(tmp_path), "release", "ada"]) == 0
        assert server.identity.learner_of(first) is None
        client.session.cookie_jar.clear()
        resp = await client.post("/learner", data={"name": "ada"}, allow_redirects=False)
        assert resp.status == 303 and server.identity.code_of("ada") != code
    finally:
        await client.close()


async def test_a_class_has_a_cap_on_learners(tmp_path):
    _, client = await _client(tmp_path, max_learners=2)
    try:
        for name in ("ada", "bob"):
            client.session.cookie_jar.clear()
            assert (await client.post("/learner", data={"name": name},
                                      allow_redirects=False)).status == 303
        client.session.cookie_jar.clear()
        resp = await client.post("/learner", data={"name": "cy"}, allow_redirects=False)
        assert resp.status == 200 and "class is full" in await resp.text()
    finally:
        await client.close()
    assert sorted(p.name for p in (tmp_path / "learners").iterdir()) == ["ada", "bob"]


async def test_the_token_becomes_a_session_cookie_that_is_not_the_token(tmp_path):
    _, client = await _client(tmp_path, TOKEN)
    try:
        resp = await client.get(f"/?token={TOKEN}", allow_redirects=False)
        assert resp.status == 303
        header = " ".join(resp.headers.getall("Set-Cookie"))
        assert TOKEN not in header and "HttpOnly" in header
        session = resp.cookies["memlab_session"].value
        # a cookie holding the token itself is not a session
        client.session.cookie_jar.clear()
        assert (await client.get("/", headers={"Cookie": f"memlab_token={TOKEN}"})).status == 403
        assert (await client.get("/", headers={"Cookie": f"memlab_session={TOKEN}"})).status == 403
        assert (await client.get("/", headers={"Cookie": f"memlab_session={session}"})).status \
            == 200
    finally:
        await client.close()


async def test_the_secret_is_private_and_a_restart_keeps_everyone_signed_in(tmp_path):
    server, client = await _client(tmp_path, TOKEN)
    try:
        await client.get(f"/?token={TOKEN}")
        resp = await client.post("/learner", data={"name": "ada"}, allow_redirects=False)
        learner = resp.cookies["memlab_learner"].value
        session = next(c.value for c in client.session.cookie_jar if c.key == "memlab_session")
    finally:
        await client.close()
    assert (tmp_path / "secret").stat().st_mode & 0o077 == 0
    assert (tmp_path / "claims" / "ada").stat().st_mode & 0o077 == 0
    restarted, client = await _client(tmp_path, TOKEN)
    try:
        cookies = f"memlab_session={session}; memlab_learner={learner}"
        page = await (await client.get("/", headers={"Cookie": cookies})).text()
        assert "textual.js" in page  # straight to the terminal page: still signed in
    finally:
        await client.close()
    assert restarted.identity.learner_of(learner) == "ada"


# ---- 8: a wrong prediction is a wrong answer in the class's summary too --------------------------------
def test_the_summary_names_wrong_predictions_as_the_table_does(tmp_path):
    from lab.serve.classview import lesson_view, text_report

    root = tmp_path / "ws"
    p = Progress.load(root / "learners" / "bob" / "progress.jsonl")
    p.commit_prediction(LESSON, 9.0)
    lesson = load_course().find("01")
    predict = next(i for i, q in enumerate(lesson.quiz) if q.kind == "predict_peak")
    p.record_answer(LESSON, predict, 9.0, False, len(lesson.quiz))
    text = text_report(lesson_view(root, lesson))
    assert f"Q{predict + 1}" in text.split("most common wrong answers:")[0]  # the table
    assert "no wrong quiz answers" not in text
    tail = text.split("most common wrong answers:")[1]
    assert f"Q{predict + 1}" in tail and "outside the ±" in tail and "1 learner(s)" in tail


# ---- end to end: the real command line, one line and exit 2 ----------------------------------------------
@pytest.mark.slow  # a fresh interpreter each
@pytest.mark.parametrize("case", ["frame-pickle", "deep-json", "traversal", "bad-lesson", "binary",
                                  "max-learners"])
def test_the_command_line_answers_bad_files_in_one_line_with_exit_2(tmp_path, case):
    import os
    import subprocess
    import sys

    env = {**os.environ}
    f = tmp_path / "input"
    if case == "frame-pickle":
        f.write_bytes(b"\x80\x04\x95" + b"\xff" * 8 + b".")
        args, says = ["view", f], "not a readable pickle"
    elif case == "deep-json":
        f.write_text("[" * 200_000 + "]" * 200_000)
        args, says = ["view", f], "too deep"
    elif case == "traversal":
        runs = [r.to_dict() for r in load_reference(LESSON).values()]
        runs[0]["variant"] = "../../../../ESCAPED_baseline"
        f.write_text(json.dumps(runs))
        args, says = ["class", "--data", tmp_path / "ws", "push", "01", "--results", f], \
            "not a safe file name"
    elif case == "bad-lesson":
        shutil.copytree(ROOT / "lessons" / "01-linear-baseline", tmp_path / "l" / "01-linear-baseline")
        toml = tmp_path / "l" / "01-linear-baseline" / "lesson.toml"
        toml.write_text(re.sub(r"(?m)^timeout_s = .*$", 'timeout_s = "soon"', toml.read_text()))
        env["MEMLAB_LESSONS_DIR"] = str(tmp_path / "l")
        args, says = ["class", "--data", tmp_path / "ws", "goto", "01"], "timeout_s: 'soon'"
    elif case == "binary":
        f.write_bytes(bytes(range(256)) * 4)
        args, says = ["export", f, "--to", tmp_path / "out"], "not UTF-8"
    else:
        args, says = ["serve", "--max-learners", "many"], "--max-learners: 'many' is not a number"
    proc = subprocess.run([sys.executable, "-m", "lab", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "ws" / "class").exists()
    assert not [p for p in tmp_path.parent.rglob("*ESCAPED*")]
