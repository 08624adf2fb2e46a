"""``compare --grader judge:NAME``: runs scored by a model judge's verdicts instead of the rule
graders, never a mix of the two, and beside any comparison each judge's agreement with the rule
graders on each run; through the real CLI, judged by the scripted judge over HTTP on 127.0.0.1.

Two runs of five tasks (replay builders). The scripted judge passes a session whose last step
finishes with its answer stated. Rule grades and the judge's verdicts, per task:

    task   A: rule judge   B: rule judge
    t1        pass  pass      pass  pass
    t2        pass  pass      fail  pass
    t3        pass  fail      fail  pass
    t4        fail  pass      fail  pass
    t5        fail  fail      fail  pass

By the rules B - A = 1/5 - 3/5 = -0.4; by the judge 5/5 - 3/5 = +0.4. The judge's kappa on A,
by hand: p_o = 3/5, p_e = (3/5)(3/5) + (2/5)(2/5) = 0.52, kappa = 0.08 / 0.48 = +0.17, SE =
sqrt(0.6 * 0.4 / (5 * 0.48^2)) = 0.456, so -0.73 to +1.00 (clipped); on B: p_o = 1/5 = p_e,
kappa = +0.00, SE = sqrt(0.2 * 0.8 / (5 * 0.8^2)) = 0.224, so -0.44 to +0.44.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownloop.store import open_store
from ownloop.testing.synthetic import Session, agent_step, click, finish, write_sessions
from tests.replay.test_judge import ownloop

_PASS = (("answer:contains:done", 1.0, True),)
_FAIL = (("answer:contains:done", 0.0, False),)


def _spec(run: str, task: int, finishes: bool, rule_passes: bool) -> Session:
    answer = f"done {task}"
    last = finish(answer) if finishes else click()
    return Session(
        f"{run}-{task}",
        run_id=run,
        task_id=f"t{task}",
        answer=answer,
        steps=[agent_step(actions=[click()]), agent_step(actions=[last])],
        grades=_PASS if rule_passes else _FAIL,
        start=task * 10 + (100 if run == "B" else 0),
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    write_sessions(
        open_store(root),
        *(
            _spec("A", task, finishes, rule)
            for task, finishes, rule in [
                (1, True, True),
                (2, True, True),
                (3, False, True),
                (4, True, False),
                (5, False, False),
            ]
        ),
        *(_spec("B", task, True, task == 1) for task in range(1, 6)),
    )
    return root


def _judge(store: Path, run: str, url: str) -> None:
    code, out = ownloop(store, "judge", "--run", run, "--endpoint", url, "--model", "judge")
    assert code == 0 and "judged 5 of 5 sessions" in out, out


@pytest.mark.slow
def test_a_judge_scores_a_comparison_only_when_it_judged_both_runs(
    store: Path, judge_url: str
) -> None:
    _judge(store, "A", judge_url)
    code, out = ownloop(store, "compare", "A", "B", "--grader", "judge:final")
    assert code != 0
    last = out.strip().splitlines()[-1]
    assert last == (
        "Error: judge 'final' has no verdict on 5 of 5 units of run 'B' (judges of that run: "
        f"none): judge them first with ownloop --store {store} judge --run B --judge final ..., "
        "or score with --grader rule"
    ), out

    _judge(store, "B", judge_url)
    code, out = ownloop(store, "compare", "A", "B", "--format", "json")
    assert code == 0, out
    by_rule = json.loads(out)
    code, out = ownloop(store, "compare", "A", "B", "--format", "json", "--grader", "judge:final")
    assert code == 0, out
    by_judge = json.loads(out)
    assert (by_rule["grader"], by_judge["grader"]) == ("rule", "judge:final")
    assert (by_rule["side_a"]["passes"], by_rule["side_b"]["passes"]) == (3, 1)
    assert (by_judge["side_a"]["passes"], by_judge["side_b"]["passes"]) == (3, 5)
    assert by_rule["difference"]["estimate"] == pytest.approx(-0.4)
    assert by_judge["difference"]["estimate"] == pytest.approx(+0.4)
    agreement = {j["run_id"]: j for j in by_rule["judges"]}
    assert agreement["A"]["confusion"] == [2, 1, 1, 1]
    assert agreement["B"]["confusion"] == [1, 0, 4, 0]
    assert agreement["A"]["kappa"] == pytest.approx(1 / 6)
    assert agreement["B"]["kappa"] == pytest.approx(0.0, abs=1e-12)

    code, out = ownloop(store, "compare", "A", "B", "--grader", "judge:final")
    assert code == 0, out
    assert (
        "scored by judge final (the majority of its verdicts on each session), not the rule graders"
    ) in out
    assert (
        "A: judge final passed 3/5 sessions; agrees with the rule graders on 0.600 of 5, "
        "kappa +0.17 (-0.73 to +1.00)"
    ) in out
    assert (
        "B: judge final passed 5/5 sessions; agrees with the rule graders on 0.200 of 5, "
        "kappa +0.00 (-0.44 to +0.44)"
    ) in out
    code, out = ownloop(store, "compare", "A", "B")
    assert code == 0 and "scored by judge" not in out and "A: judge final passed 3/5" in out


@pytest.mark.parametrize("grader", ["judge", "judge:", "webjudge", "judge:a/control:blank"])
def test_a_bad_grader_is_one_line(store: Path, grader: str) -> None:
    code, out = ownloop(store, "compare", "A", "B", "--grader", grader)
    assert code != 0 and "Traceback" not in out
    assert (
        out.strip()
        .splitlines()[-1]
        .endswith(
            f"--grader {grader!r}: use rule (the rule graders) or judge:NAME (a model judge's "
            "verdicts, e.g. judge:final)"
        )
    ), out
