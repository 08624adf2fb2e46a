"""The dashboard's parts without a browser: pagination links, thumbnails and content boxes, the
DOM tree, the compare grid against ``ownloop compare``, search, and the new pages over HTTP
(headers, bad blob names, hostile parameters, a store that changes while cached)."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from PIL import Image

from ownloop.errors import OwnloopError
from ownloop.replay.compare import compare_runs
from ownloop.store import Store, open_store
from ownloop.store import events as E
from ownloop.store.queries import search_steps
from ownloop.view.app import CSP
from ownloop.view.domtree import MAX_NODES, parse_dom
from ownloop.view.grid import build_grid
from ownloop.view.listing import page_links
from ownloop.view.search import search
from ownloop.view.server import ViewServer
from ownloop.view.thumbs import content_box, thumbnail
from tests.view.dashboard import (
    CONTENT,
    HOSTILE_RUN,
    HOSTILE_SEARCH,
    RARE_WORD,
    DashboardStore,
    at,
    build_dashboard_store,
    page_png,
)


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> DashboardStore:
    root: Path = tmp_path_factory.mktemp("dash") / "store"
    return build_dashboard_store(open_store(root, fsync=False))


class Reply(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


def _get(url: str) -> Reply:
    try:
        with urllib.request.urlopen(url) as response:
            return Reply(response.status, dict(response.headers), response.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, dict(error.headers), error.read())


@pytest.mark.parametrize(
    ("page", "pages", "links"),
    [
        (1, 1, [1]),
        (1, 3, [1, 2, 3]),
        (1, 20, [1, 2, 3, None, 20]),
        (6, 20, [1, None, 4, 5, 6, 7, 8, None, 20]),
        (4, 20, [1, 2, 3, 4, 5, 6, None, 20]),
        (20, 20, [1, None, 18, 19, 20]),
    ],
)
def test_the_pager_links_the_ends_and_two_pages_either_side(
    page: int, pages: int, links: list[int | None]
) -> None:
    assert page_links(page, pages) == links


def test_a_thumbnail_is_a_small_webp_and_the_content_box_bounds_the_page() -> None:
    png = page_png(40)
    data = thumbnail(png, 160)
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (160, 100)
    assert len(data) < len(png) / 4
    box = content_box(png)
    left, top, right, bottom = CONTENT
    assert (box.image_width, box.image_height) == (1280, 800)
    assert left - 10 <= box.x <= left and top - 10 <= box.y <= top
    assert right < box.x + box.width <= right + 10
    assert bottom < box.y + box.height <= bottom + 10
    blank = io.BytesIO()
    Image.new("RGB", (300, 200), (250, 250, 250)).save(blank, format="PNG")
    assert content_box(blank.getvalue())[:4] == (0, 0, 300, 200)  # nothing but background


def test_the_dom_tree_keeps_scripts_as_nodes_and_stops_at_its_limit() -> None:
    tree = parse_dom(
        '<html><body><div id="a"><script>window.pwned=1</script>'
        "<p>hi <b>there</b></p><br><img src=x></div></body></html>"
    )
    (html,) = tree.roots
    body = html.children[0]
    div = body.children[0]
    assert (div.tag, div.attributes) == ("div", 'id="a"')
    assert [c.tag for c in div.children] == ["script", "p", "br", "img"]
    assert div.children[0].children[0].text == "window.pwned=1"
    assert [c.text or c.tag for c in div.children[1].children] == ["hi", "b"]
    big = parse_dom("<ul>" + "<li>x</li>" * MAX_NODES + "</ul>")
    assert big.cut and big.nodes == MAX_NODES


def test_the_grid_agrees_with_ownloop_compare(dash: DashboardStore) -> None:
    grid = build_grid(
        dash.store,
        [dash.run_b, dash.run_a],  # ordered by when they started
        intervals=True,
    )
    assert grid.runs == [dash.run_a, dash.run_b]
    assert [row.task_id for row in grid.rows][:2] == ["t-flip", "t-mixed"]
    assert [row.flipped for row in grid.rows] == [True, False, False, False]
    assert [row.mixed for row in grid.rows] == [True, True, False, False]
    expected = compare_runs(dash.store, dash.run_a, dash.run_b)
    (difference,) = grid.differences
    assert difference.interval == expected.difference
    assert difference.estimate == pytest.approx(expected.difference.estimate)
    assert (difference.only_first, difference.only_this) == (expected.only_a, expected.only_b)
    assert difference.p_value == expected.p_value
    flip = grid.rows[0]
    (task,) = expected.flipped
    assert task.divergence is not None
    assert flip.cells[1].pair_url == (
        f"/pair/{task.divergence.session_a}/{task.divergence.session_b}"
    )
    with pytest.raises(OwnloopError, match="pick two or more runs"):
        build_grid(dash.store, [dash.run_a])
    with pytest.raises(OwnloopError, match="no graded scored sessions"):
        build_grid(dash.store, [dash.run_a, "nope"])


def test_search_gives_one_hit_per_step_and_filters(dash: DashboardStore) -> None:
    found = search_steps(dash.store, RARE_WORD.upper(), {}, 50, 0)
    assert found.total == 1
    (row,) = found.rows
    assert row[:2] == (dash.rare_session, 2)
    assert search_steps(dash.store, RARE_WORD, {"run": dash.run_b}, 50, 0).total == 0
    assert search_steps(dash.store, "'; drop table sessions; --", {}, 50, 0).total == 0
    view = search(dash.store, {"q": "pwned", "status": "finished"})
    assert [h.before + h.match + h.after for h in view.hits] == [HOSTILE_SEARCH]
    assert view.hits[0].run_id == HOSTILE_RUN
    # "cancel": the element the failing sessions clicked, as 'element' hits at their step 2
    view = search(dash.store, {"q": "CANCEL", "page": "1"})
    assert {h.field for h in view.hits} == {"element"} and {h.step for h in view.hits} == {2}
    # one per failing session: A's t-mixed 1 + t-fail 3, B's t-flip 2 + t-fail 3
    assert view.total == 9
    assert search(dash.store, {"q": "CANCEL", "page": "999"}).total == view.total


@pytest.fixture(scope="module")
def site(dash: DashboardStore) -> Iterator[str]:
    with ViewServer(dash.store, port=0) as url:
        yield url


def test_the_new_pages_answer_with_the_strict_policy(site: str, dash: DashboardStore) -> None:
    run = urllib.parse.quote(dash.run_b, safe="")
    for path in (
        "",
        f"run/{run}",
        f"compare?run={dash.run_a}&run={run}",
        "search?q=click",
        f"pair/{dash.flip_pair[0]}/{dash.flip_pair[1]}",
    ):
        reply = _get(site + path)
        assert reply.status == 200, path
        assert reply.headers["content-security-policy"] == CSP
        assert b"<script>window.pwned" not in reply.body
        assert b"<b>run</b>" not in reply.body  # the hostile run id is escaped everywhere
    assert "connect-src 'self'" in CSP and "script-src 'self'" in CSP


def test_thumbnails_and_boxes_only_of_images(site: str, dash: DashboardStore) -> None:
    sha = dash.store.sql("select sha256 from screenshots limit 1").rows[0][0]
    reply = _get(f"{site}thumb/{sha}?w=240")
    assert reply.status == 200 and reply.headers["content-type"] == "image/webp"
    assert reply.headers["content-security-policy"] == "default-src 'none'; sandbox"
    with Image.open(io.BytesIO(reply.body)) as image:
        assert image.width == 240
    assert _get(f"{site}thumb/{sha}?w=5000").status == 200  # an odd width: the default
    box = json.loads(_get(f"{site}box/{sha}").body)
    assert box["image_width"] == 1280 and box["x"] <= CONTENT[0]
    text = dash.store.put_blob(b"<html><script>window.pwned=1</script></html>")
    assert _get(f"{site}thumb/{text}").status == 404
    assert _get(f"{site}box/{text}").status == 404
    assert _get(f"{site}thumb/..%2F..%2Fetc%2Fpasswd").status == 404
    assert _get(f"{site}thumb/{'0' * 64}").status == 404


def test_unknown_things_are_one_line_404s(site: str) -> None:
    for path in ("run/nope", f"pair/nope/{'x'}", "compare?run=one"):
        reply = _get(site + path)
        assert reply.status in (400, 404), path
        assert b'class="error"' in reply.body
    assert b"pick two or more runs" in _get(site + "compare?run=one").body


def test_a_cached_page_changes_when_the_store_does(tmp_path: Path) -> None:
    store: Store = open_store(tmp_path / "store", fsync=False)
    with store.stream("r") as stream:
        stream.append([E.RunStarted(at=at(0), run_id="first", session_id="", agent="a")])
    with ViewServer(store, port=0) as url:
        assert b"first" in _get(url).body and b"second" not in _get(url).body
        with store.stream("r2") as stream:
            stream.append([E.RunStarted(at=at(1), run_id="second", session_id="", agent="a")])
        assert b"second" in _get(url).body


def test_a_session_page_links_its_run_its_neighbours_and_its_tasks_other_repeats(
    site: str, dash: DashboardStore
) -> None:
    body = _get(site + "session/a-t-pass-2").body.decode()
    assert f'<a class="run" href="/run/{dash.run_a}">{dash.run_a}</a>' in body
    assert 'rel="prev" href="/session/a-t-pass-1"' in body
    assert 'rel="next" href="/session/a-t-pass-3"' in body
    repeats = body.split('class="repeats"', 1)[1].split("</span>", 1)[0]
    assert 'href="/session/a-t-pass-1">repeat 1</a>' in repeats
    assert 'href="/session/a-t-pass-3">repeat 3</a>' in repeats and "a-t-pass-2" not in repeats
    first = _get(
        site
        + "session/a-"
        + dash.store.sql(
            "select task_id from sessions where run_id = $r order by started_at limit 1",
            {"r": dash.run_a},
        ).rows[0][0]
        + "-1"
    ).body.decode()
    assert 'rel="prev"' not in first and 'rel="next"' in first  # the run's first session


def test_each_step_shows_what_the_model_saw_every_image_in_order(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store", fsync=False)
    shots = [store.put_blob(page_png(shade)) for shade in (40, 90)]
    ids = {"run_id": "r", "session_id": "s1"}
    system = E.Message(role="system", parts=(E.TextPart(text="You are a <b>helpful</b> agent."),))
    history: list[E.Message] = [system]
    events: list[E.Event] = [
        E.SessionStarted(at=at(0), **ids, task=E.Task(task_id="t", prompt="p", start_url="u"))
    ]
    for number, sha in enumerate(shots, 1):
        image = E.ImagePart(sha256=sha, width=1280, height=800)
        history.append(E.Message(role="user", parts=(E.TextPart(text=f"step {number}"), image)))
        events += [
            E.ScreenshotTaken(
                at=at(number), **ids, step=number, sha256=sha, width=1280, height=800
            ),
            E.ModelCalled(
                at=at(number + 0.1),
                **ids,
                step=number,
                call_id=f"c{number}",
                messages=tuple(history),
                response=f"Thought: t{number}\nAction: click",
            ),
        ]
        history.append(E.Message(role="assistant", parts=(E.TextPart(text=f"answer {number}"),)))
    events.append(E.SessionEnded(at=at(9), **ids, status="finished", steps=2))
    with store.stream("s1") as stream:
        stream.append(events)
    with ViewServer(store, port=0) as url:
        body = _get(url + "session/s1").body.decode()
    second = body.split('id="request-2"', 1)[1].split("</details>", 1)[0]
    assert "what the model saw: 4 messages, 2 images" in second
    assert '1. system</span>\n<span class="same">as at step 1</span>' in second
    images = [part.split('"', 1)[0] for part in second.split('class="sent" src="/thumb/')[1:]]
    assert images == [f"{sha}?w=240" for sha in shots]  # every image sent, in order
    assert "answer 1" in second  # the history the model was sent
    first = body.split('id="request-1"', 1)[1].split("</details>", 1)[0]
    assert "You are a &lt;b&gt;helpful&lt;/b&gt; agent." in first  # recorded text is escaped


def test_a_sealed_runs_page_says_how_to_cite_it_and_its_judges_agreement(
    dash: DashboardStore, tmp_path: Path
) -> None:
    import shutil

    from click.testing import CliRunner

    from ownloop.cli import cli
    from ownloop.modelserver import ModelServer
    from ownloop.modelserver.judge import ScriptedJudge

    root = tmp_path / "store"
    shutil.copytree(dash.store.root, root)

    def ownloop(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--store", str(root), *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    with open_store(root).stream("run-0-end") as stream:  # the run ended: it may be sealed
        stream.append([E.RunEnded(at=at(10_000), run_id=dash.run_a, session_id="")])
    sealed = ownloop("seal", "--run", dash.run_a)
    fingerprint = next(w for w in sealed.split() if len(w) == 64)
    with ModelServer(ScriptedJudge(), models=("j",)) as url:
        ownloop("judge", "--run", dash.run_a, "--endpoint", url, "--model", "j")
    with ViewServer(open_store(root), port=0) as url:
        body = _get(url + "run/" + dash.run_a).body.decode()
        hostile = _get(url + "run/" + urllib.parse.quote(dash.run_b, safe="")).body.decode()
    cite = body.split('<section class="cite" id="cite">', 1)[1].split("</section>", 1)[0]
    assert f"fingerprint {fingerprint}" in cite
    assert f"check it: ownloop verify --run {dash.run_a} --fingerprint {fingerprint}" in cite
    assert "n = 4 tasks, 12 sessions" in cite and "recorded with ownloop " in cite
    # The scripted judge fails every session (none ends with finish): it agrees with the rule
    # graders on their 4 failures of 12, no better than chance: kappa 0, SE sqrt((1/3)(2/3) /
    # (12 (2/3)^2)) = 0.204, so 0 -/+ 0.40.
    judge = body.split('<dd class="judge" data-judge="final">', 1)[1].split("</dd>", 1)[0]
    assert "0 of 12 sessions passed; agrees with the rule graders on 0.333 of 12" in judge
    assert "kappa 0.00 [-0.40, 0.40]" in judge and "never the run's score" in judge
    assert 'id="cite"' not in hostile and 'class="judge"' not in hostile  # not sealed, not judged
