"""Nothing the candidate's token can fetch gives the interview away.

A wrong tree_mask answer (a causal triangle over the drafts, which draws a diagnosis) is run
and graded for real; hint 1 is sent. Then every route of the app, every method, and every static file is
fetched with the candidate's token, and no hint text but the one sent, no sheet text, no
reference line, no hidden check's code, and (unless the feedback is detail) no diagnosis may
appear. With detail feedback the diagnosis must appear: the probe sees what it looks for.
"""
import re
import time

import pytest

from grader import catalog
from grader.room.finish import REPORTS
from grader.room.session import Room
from grader.workspace import exercise_files

from .room_server import WRONG

pytestmark = pytest.mark.slow

EXERCISE = "tree_mask"
RUN_SECONDS = 300


def _graded_room(folder, feedback: str) -> Room:
    room = Room(folder, [EXERCISE], None, feedback)
    for kind in ("public", "submit"):
        room.run(EXERCISE, kind, {"tree_mask.py": WRONG})
        deadline = time.monotonic() + RUN_SECONDS
        while room.store.runs()[-1]["status"] == "running":
            assert time.monotonic() < deadline, f"the {kind} run did not finish within {RUN_SECONDS} s"
            time.sleep(0.2)
        assert room.store.runs()[-1]["status"] == "done", room.store.runs()[-1]
    room.send_hint(EXERCISE, 1)
    return room


def _everything_the_candidate_fetches(room: Room) -> str:
    pytest.importorskip("starlette", reason="the room extra (kvgrade[room]) is not installed")
    from starlette.routing import Mount
    from starlette.testclient import TestClient

    from grader.room.app import HERE, create_app

    app = create_app(room)
    client = TestClient(app, raise_server_exceptions=False)
    token = room.meta["candidate_token"]
    header = {"X-Kvgrade-Token": token}
    bodies = []
    for route in app.routes:
        if isinstance(route, Mount):
            bodies += [client.get(f"/static/{p.name}").text for p in (HERE / "static").iterdir()]
            continue
        for name in REPORTS:
            path = route.path.replace("{token}", token).replace("{name}", name)
            for method in sorted(route.methods or {"GET"}):
                if path.endswith("/events"):
                    with client.stream("GET", f"{path}?token={token}") as stream:
                        bodies.append(next(stream.iter_text()))
                    continue
                bodies.append(client.request(method, path, headers=header, json={}).text)
                bodies.append(client.request(method, f"{path}?token={token}").text)
    return "\n".join(bodies)


def _lines(path, shown: str) -> list[str]:
    """Lines of a file the candidate must never see: long enough to mean something, and not
    also part of what they are shown (the prompt, stub, public tests, check descriptions)."""
    out = []
    for line in path.read_text().splitlines():
        line = line.strip().strip('"').strip()
        if len(line) >= 24 and line not in shown and not line.startswith(("#", "from ", "import ")):
            out.append(line)
    return out


def words(text: str) -> str:
    return " ".join(text.split())


def _secrets(exercise, shown: str) -> dict[str, list[str]]:
    r = exercise.rubric
    return {
        "hint": [words(h.text) for h in r.hints[1:]],
        "sheet": [words(r.summary), *map(words, r.levels.values()), *(words(c.expect) for c in r.checkpoints),
                  *(words(c.text) for c in r.criteria if c.observed),
                  *(words(f.ask) for f in r.follow_ups), *(words(f.listen_for) for f in r.follow_ups)],
        "diagnosis": ["triangle_tree_mask"] + [d.explain for d in r.diagnoses],
        "reference": _lines(exercise.reference_path, shown),
        "hidden check": _lines(exercise.hidden_checks, shown),
    }


@pytest.mark.parametrize("feedback", ["summary", "detail"])
def test_the_candidates_token_fetches_nothing_it_must_not_see(tmp_path, feedback):
    exercise = catalog.get(EXERCISE)
    room = _graded_room(tmp_path / "s", feedback)
    try:
        fetched = " ".join(_everything_the_candidate_fetches(room).split())
        descriptions = " ".join(c["description"] for r in room.candidate_view()["exercises"][0]["runs"]
                                for c in r.get("checks", []))
        shown = " ".join(p.read_text() for p in exercise_files(exercise)) + WRONG + descriptions
        assert " ".join(exercise.rubric.hints[0].text.split()) in fetched  # the hint sent is there
        found = {kind: [s for s in texts if s and " ".join(s.split()) in fetched]
                 for kind, texts in _secrets(exercise, shown).items()}
        if feedback == "detail":
            assert "triangle_tree_mask" in found.pop("diagnosis")  # detail shows diagnoses, as chosen
        assert not any(found.values()), found
        assert re.search(r"failed|passed", fetched)  # the public run's outcome and the checks are there
    finally:
        room.close()
