"""The expert's plan cache: a second server asked about an episode already planned on this machine
reads the plan and starts no Chromium; a page served altered (its HTML, or a stylesheet it links)
is planned anew; a damaged entry is planned again. Real pages on a real static server, real
Chromium for the plans made, each test with a cache folder of its own."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from ownloop.modelserver.expert import MiniwobExpert
from ownloop.modelserver.plan_cache import page_digest, plan_key
from ownloop.modelserver.plans import Plan
from ownloop.store.events import Click
from ownloop.world.suites.miniwob import MiniwobSuite, html_dir, serve_static

SEED = 5
VIEWPORT = (1280, 800)


class Planned(NamedTuple):
    cache: Path  # the OWNLOOP_CACHE folder holding the plan
    url: str  # click-button seed SEED on the suite's own server
    plan: Plan
    notices: list[str]
    expert: MiniwobExpert  # the one that made it (its browser closed, its plans kept)
    kept: str  # its file's name in expert-plans/


def _request(url: str) -> dict[str, object]:
    statement = (
        f"You are interacting with a web application at {url}. Your task: Click on the button."
    )
    return {"model": "expert", "messages": [{"role": "user", "content": statement}]}


@pytest.fixture(scope="module")
def suite() -> Iterator[MiniwobSuite]:
    with MiniwobSuite("click-button") as own:
        yield own


@pytest.fixture(scope="module")
def planned(suite: MiniwobSuite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planned]:
    """click-button planned once, by a first expert, into a cache of the module's own."""
    cache = tmp_path_factory.mktemp("plans") / "cache"
    notices: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OWNLOOP_CACHE", str(cache))
        first = MiniwobExpert("uitars", notice=notices.append)
        try:
            url = suite.task_url("click-button", SEED)
            plan = first.plan(url, VIEWPORT)
            assert first.browser.launches == 1
        finally:
            first.close()
    [kept] = (cache / "expert-plans").glob("*.json")
    assert kept.name.startswith("click-button-5-1280x800-")
    yield Planned(cache, url, plan, notices, first, kept.name)


@pytest.fixture
def cache_of(planned: Planned, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's cache, as this test's OWNLOOP_CACHE."""
    monkeypatch.setenv("OWNLOOP_CACHE", str(planned.cache))
    return planned.cache


def _served_altered(root: Path, *, page: str = "", stylesheet: str = "") -> Path:
    """A copy of the MiniWoB pages in ``root`` (links to the originals) where click-button.html
    gets ``page`` before its ``</head>`` and core.css ends with ``stylesheet``."""
    original = html_dir()
    root.mkdir()
    (root / "common").symlink_to(original / "common")
    (root / "core").mkdir()
    for entry in (original / "core").iterdir():
        if entry.name != "core.css":
            (root / "core" / entry.name).symlink_to(entry)
    css = (original / "core" / "core.css").read_text(encoding="utf-8")
    (root / "core" / "core.css").write_text(css + stylesheet, encoding="utf-8")
    (root / "miniwob").mkdir()
    html = (original / "miniwob" / "click-button.html").read_text(encoding="utf-8")
    altered = html.replace("</head>", f"{page}</head>", 1)
    (root / "miniwob" / "click-button.html").write_text(altered, encoding="utf-8")
    return root


def _first_click(plan: Plan) -> Click:
    click = plan.steps[0].actions[0]
    assert isinstance(click, Click)
    return click


@pytest.mark.browser
def test_a_second_server_reads_the_plan_starts_no_chromium_and_answers_the_same(
    planned: Planned, cache_of: Path
) -> None:
    assert planned.notices[0].startswith("expert: planning click-button (seed 5), the first plan")
    notices: list[str] = []
    second = MiniwobExpert("uitars", notice=notices.append)
    try:
        assert second.plan(planned.url, VIEWPORT) == planned.plan
        assert second.browser.launches == 0
        assert notices == [
            f"expert: plan for click-button (seed 5) read from the plan cache "
            f"{cache_of / 'expert-plans'}: 2 steps, rehearsal reward "
            f"{planned.plan.reward:g}, no browser started"
        ]
        assert second(_request(planned.url)) == planned.expert(_request(planned.url))
        assert second.browser.launches == 0
    finally:
        second.close()


@pytest.mark.browser
def test_an_altered_page_or_stylesheet_is_planned_anew(
    planned: Planned, cache_of: Path, tmp_path: Path
) -> None:
    roots = {
        "page": _served_altered(
            tmp_path / "page", page="<style>#area { position: relative; left: 40px; }</style>"
        ),
        "stylesheet": _served_altered(
            tmp_path / "stylesheet", stylesheet="\n#area { position: relative; top: 30px; }\n"
        ),
    }
    servers = {name: serve_static(root) for name, root in roots.items()}
    fresh = MiniwobExpert("uitars")
    try:
        urls = {
            name: "http://127.0.0.1:{}/miniwob/click-button.html?seed={}".format(
                server.server_address[1], SEED
            )
            for name, server in servers.items()
        }
        page = fresh.plan(urls["page"], VIEWPORT)
        stylesheet = fresh.plan(urls["stylesheet"], VIEWPORT)
        assert fresh.browser.launches == 1  # both made in its browser, none read
        before = _first_click(planned.plan)
        assert _first_click(page).x == pytest.approx(before.x + 40, abs=1)
        assert _first_click(page).y == before.y
        assert _first_click(stylesheet).y == pytest.approx(before.y + 30, abs=1)
        assert len(list((cache_of / "expert-plans").glob("click-button-5-*.json"))) == 3
    finally:
        fresh.close()
        for server in servers.values():
            server.shutdown()
            server.server_close()


@pytest.mark.browser
@pytest.mark.parametrize(
    "damage",
    [b'{"task": "click-button", "steps": [', b"[]", b'["click-link", 5, [1280, 800], [], 1.0]'],
    ids=["torn", "empty", "another-plan"],
)
def test_a_damaged_plan_is_ignored_and_planned_again(
    planned: Planned, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: bytes
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(planned.cache, cache)
    monkeypatch.setenv("OWNLOOP_CACHE", str(cache))
    kept = cache / "expert-plans" / planned.kept
    kept.write_bytes(damage)
    expert = MiniwobExpert("uitars")
    try:
        plan = expert.plan(planned.url, VIEWPORT)
        assert expert.browser.launches == 1
        assert plan.steps == planned.plan.steps  # the same episode, planned again
    finally:
        expert.close()
    again = MiniwobExpert("uitars")  # and kept again: the next server reads it
    try:
        assert again.plan(planned.url, VIEWPORT) == plan
        assert again.browser.launches == 0
    finally:
        again.close()


def test_the_key_names_page_task_seed_viewport_and_rehearsal() -> None:
    base = {"page": "a" * 64, "task": "click-button", "seed": 5, "viewport": (1280, 800)}
    key = plan_key(**base, rehearse=True)  # type: ignore[arg-type]
    assert plan_key(**base, rehearse=True) == key  # type: ignore[arg-type]
    changed = [
        {**base, "page": "b" * 64},
        {**base, "task": "click-link"},
        {**base, "seed": 6},
        {**base, "viewport": (1024, 768)},
    ]
    keys = {plan_key(**other, rehearse=True) for other in changed}  # type: ignore[arg-type]
    keys.add(plan_key(**base, rehearse=False))  # type: ignore[arg-type]
    assert len(keys) == 5 and key not in keys


def test_a_page_that_does_not_answer_has_no_digest() -> None:
    assert page_digest("http://127.0.0.1:9/miniwob/click-button.html?seed=5") is None
