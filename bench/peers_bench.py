"""The same trajectories kept three ways: the seed's plain folder, Inspect's ``.eval`` log and
ownloop's store, written and queried side by side in one run.

    .venv/bin/python bench/peers_bench.py              # 100 sessions x 20 steps (minutes)
    .venv/bin/python bench/peers_bench.py --quick      # 20 sessions x 20 steps
    .venv/bin/python bench/peers_bench.py --synthetic  # distinct noisy PNGs instead
    .venv/bin/python bench/peers_bench.py --durable    # only a durable append and the query

Inspect's column needs inspect_ai (a bench-only dependency): pip install -e '.[bench]'. Without
it that column is skipped with a notice. Every session is 20 steps, each with a 1280x800 PNG
screenshot: by default real MiniWoB pages after a click or typing, taken in headless Chromium
(``miniwob_shots.py``, cached in the temporary folder; consecutive screenshots often repeat, as
in real runs); with ``--synthetic`` distinct noisy page-like PNGs (``store_bench.screenshots``).
Each model request carries the last five screenshots, as the agents send them. Ratios are
against the plain folder, measured in the same run (writers interleaved, so the machine's load
hits each alike). The ``format 1`` column is ownloop's store writing every request in full (its
journal format before requests were written compactly), for the before/after figures. The bytes
are given for the store as ``record --keep-png`` leaves it (PNGs as captured) and as ``record``
leaves it by default (each session's screenshots compacted in the background as it ends: the same
writes again, untimed against the others, with ``ownloop.store.compactor`` fed as a recorder does).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from miniwob_shots import real_screenshots  # noqa: E402
from store_bench import T0, screenshots, step_events  # noqa: E402

from ownloop.replay.selection import fold_selected  # noqa: E402
from ownloop.store import Store, open_store  # noqa: E402
from ownloop.store import events as E  # noqa: E402
from ownloop.store.compactor import BackgroundCompaction, CompactionEnd  # noqa: E402
from ownloop.store.journal import StreamWriter  # noqa: E402

WINDOW = 5  # screenshots per model request
SYSTEM = "You are a GUI agent. You are given a task and your action history, with screenshots."
PROMPT = (
    "You are a GUI agent. You are given a task and your action history, with screenshots. You "
    "need to perform the next action to complete the task.\n\n## Output Format\n```\nThought: "
    "...\nAction: ...\n```\n\n## Action Space\nclick(start_box='<|box_start|>(x1,y1)<|box_end|>')"
    "\nleft_double(start_box='<|box_start|>(x1,y1)<|box_end|>')\ntype(content='')\nscroll("
    "start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')\n"
    "wait()\nfinished(content='xxx')\n\n## Note\n- Use English in `Thought` part.\n- Write a "
    "small plan and finally summarize your next action (with its target element) in one "
    "sentence in `Thought` part.\n\n## User Instruction\n"
)
# The steps and last response of every session, as a user would ask each store.
OWNLOOP_QUERY = (
    "select session_id, count(*) as steps, arg_max(response, step) as last_response "
    "from steps group by session_id order by session_id"
)
# Every request in full (what a compact journal must put back together).
REQUESTS_QUERY = "select session_id, step, messages from model_calls"
SMOKE = False  # --smoke: every measure taken once, no warm-up call (a check, not a figure)


# ------------------------------------------------------------------ the trajectories
class Step(msgspec.Struct, frozen=True):
    """One generated step: what every writer is given."""

    session: str
    step: int
    png: bytes
    response: str
    action: str
    at: datetime


def cached_screenshots(n: int) -> list[bytes]:
    """``store_bench.screenshots(n)``, kept in the temporary folder between runs (drawing and
    encoding 2,000 of them takes minutes on a busy machine; their timing is not measured)."""
    folder = Path(tempfile.gettempdir()) / "ownloop-peers-bench-pngs"
    paths = [folder / f"{i:05d}.png" for i in range(n)]
    if all(p.exists() for p in paths):
        return [p.read_bytes() for p in paths]
    pngs = screenshots(n)
    folder.mkdir(exist_ok=True)
    for path, png in zip(paths, pngs, strict=True):
        path.write_bytes(png)
    return pngs


def trajectories(sessions: int, steps: int, synthetic: bool = False) -> list[list[Step]]:
    if synthetic:
        pngs = cached_screenshots(sessions * steps)
    else:
        pngs = [png for shots in real_screenshots(sessions, steps) for png in shots]
    out = []
    for s in range(sessions):
        session = f"session-{s:04d}"
        out.append(
            [
                Step(
                    session,
                    i,
                    pngs[s * steps + i],
                    f"Thought: I click the button labelled {i}.\n"
                    f"Action: click(start_box='({i * 10},{200 + s})')",
                    f"pyautogui.click({i * 10}, {200 + s})",
                    T0 + timedelta(seconds=s * 60 + i * 2),
                )
                for i in range(steps)
            ]
        )
    return out


def task(session: str) -> E.Task:
    number = int(session.rsplit("-", 1)[1])
    return E.Task(
        task_id=f"miniwob.click-button.{number}",
        prompt=f"Click on the button labelled {number % 20}.",
        start_url="http://127.0.0.1:8312/miniwob/click-button.html",
        suite="miniwob",
        seed=number,
    )


# ------------------------------------------------------------------ plain folder
def _png_to_device() -> Callable[[int], None]:
    """What the store does to each new blob before the line naming it: Linux's
    sync_file_range (its bytes written to the device and waited for; the line's fsync then
    flushes the device's cache), else an fsync."""
    import ctypes
    import ctypes.util

    try:
        call = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return os.fsync
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]

    def write_and_wait(fd: int) -> None:
        if call(fd, 0, 0, 1 | 2 | 4) != 0:
            raise OSError(ctypes.get_errno(), "sync_file_range")

    return write_and_wait


def write_plain(
    root: Path, sessions: list[list[Step]], fsync: bool, durable_pngs: bool = False
) -> None:
    """The seed's layout (as OSWorld's result folders): per session a folder with
    ``traj.jsonl`` (a line per step: its response and action) and a PNG per step. With
    ``durable_pngs`` each PNG reaches the device before its line, as the store's blobs do."""
    to_device = _png_to_device() if durable_pngs else None
    for steps in sessions:
        folder = root / steps[0].session
        folder.mkdir(parents=True)
        (folder / "instruction.txt").write_text(task(steps[0].session).prompt)
        with open(folder / "traj.jsonl", "a") as log:
            for st in steps:
                name = f"step_{st.step + 1}_{st.at:%Y%m%d@%H%M%S}.png"
                with open(folder / name, "wb") as png:
                    png.write(st.png)
                    png.flush()
                    if to_device is not None:
                        to_device(png.fileno())
                line = {
                    "step_num": st.step + 1,
                    "action_timestamp": f"{st.at:%Y%m%d@%H%M%S}",
                    "action": st.action,
                    "response": st.response,
                    "reward": 0,
                    "done": st.step == len(steps) - 1,
                    "info": {},
                    "screenshot_file": name,
                }
                log.write(json.dumps(line) + "\n")
                log.flush()
                if fsync:  # one fsync per step: the line's (the PNG's only with durable_pngs)
                    os.fsync(log.fileno())
        (folder / "result.txt").write_text("1.0\n")


def query_plain(root: Path) -> list[tuple[str, int, str]]:
    rows = []
    for folder in sorted(root.iterdir()):
        with open(folder / "traj.jsonl") as f:
            lines = [json.loads(line) for line in f]
        rows.append((folder.name, len(lines), lines[-1]["response"]))
    return rows


# ------------------------------------------------------------------ ownloop
def write_ownloop(
    root: Path,
    sessions: list[list[Step]],
    fsync: bool,
    format1: bool = False,
    packed: bool = False,
) -> None:
    """As a recorder writes: a stream per session, the step's blob then its five events (with
    ``format1``, every request in full); the blobs as files, as ``record --keep-png`` writes
    them, or with ``packed`` in one pack, as ``record`` writes them by default (the pack left
    as it is: no compaction writes it out)."""
    StreamWriter.compact_requests = not format1
    try:
        _write_ownloop(root, sessions, fsync, packed=packed)
    finally:
        StreamWriter.compact_requests = True


def write_default(root: Path, sessions: list[list[Step]]) -> tuple[float, CompactionEnd]:
    """As ``record`` writes by default: with an fsync a step, and each session's screenshots
    handed to the background compaction as the session ends. Returns the seconds the writing
    took (the compaction running beside it) and where the compaction stood when it was done."""
    compaction = BackgroundCompaction(root)
    began = time.perf_counter()
    _write_ownloop(root, sessions, True, compaction.add, packed=True)
    seconds = time.perf_counter() - began
    return seconds, compaction.finish(wait_s=3600)


def _write_ownloop(
    root: Path,
    sessions: list[list[Step]],
    fsync: bool,
    ended: Callable[[str], None] = lambda session: None,
    *,
    packed: bool,
) -> None:
    store = open_store(root, fsync=fsync)
    if packed:
        store.blobs.start_packing()  # as record does (ownloop.recorder.runner)
    try:
        _write_sessions(store, sessions, ended)
    finally:
        store.blobs.close_pack()  # (before the compaction's end, as record does)


def _write_sessions(store: Store, sessions: list[list[Step]], ended: Callable[[str], None]) -> None:
    with store.stream() as run_stream:
        run_stream.append(
            [E.RunStarted(at=T0, run_id="r", agent="uitars", model="uitars15-7b", max_steps=20)]
        )
    for steps in sessions:
        session = steps[0].session
        with store.stream(session) as stream:
            stream.append(
                [
                    E.SessionStarted(
                        at=steps[0].at,
                        run_id="r",
                        session_id=session,
                        task=task(session),
                        agent="uitars",
                        model="uitars15-7b",
                        viewport=(1280, 800),
                        budget=20,
                    )
                ]
            )
            history: list[tuple[str, str]] = []  # (sha256, response) of the steps before
            for st in steps:
                sha = store.put_blob(st.png)
                events = step_events("r", session, st.step, sha, st.at)
                called = events[1]
                assert isinstance(called, E.ModelCalled)
                events[1] = msgspec.structs.replace(
                    called, messages=request(session, history, sha), response=st.response
                )
                stream.append(events)
                history.append((sha, st.response))
            stream.append(
                [
                    E.SessionEnded(
                        at=steps[-1].at,
                        run_id="r",
                        session_id=session,
                        status="finished",
                        steps=len(steps),
                        seconds=40.0,
                    ),
                    E.SessionGraded(
                        at=steps[-1].at,
                        run_id="r",
                        session_id=session,
                        grader="miniwob",
                        score=1.0,
                        passed=True,
                    ),
                ]
            )
        ended(session)


def request(session: str, history: Sequence[tuple[str, str]], now: str) -> tuple[E.Message, ...]:
    """UI-TARS's request: system, prompt, past responses with the last four screenshots, now."""
    messages = [
        E.Message(role="system", parts=(E.TextPart(text=SYSTEM),)),
        E.Message(role="user", parts=(E.TextPart(text=PROMPT + task(session).prompt),)),
    ]
    first_with_image = len(history) - (WINDOW - 1)
    for i, (sha, response) in enumerate(history):
        if i >= first_with_image:
            messages.append(
                E.Message(role="user", parts=(E.ImagePart(sha256=sha, width=1280, height=800),))
            )
        messages.append(E.Message(role="assistant", parts=(E.TextPart(text=response),)))
    messages.append(
        E.Message(role="user", parts=(E.ImagePart(sha256=now, width=1280, height=800),))
    )
    return tuple(messages)


def query_ownloop(root: Path) -> list[tuple[str, int, str]]:
    return [(s, n, r) for s, n, r in open_store(root).sql(OWNLOOP_QUERY).rows]


def query_requests(root: Path) -> int:
    """Every request in full through SQL; returns their JSON's length."""
    return sum(len(m) for _, _, m in open_store(root).sql(REQUESTS_QUERY).rows)


def fold_requests(root: Path) -> int:
    """Every session folded from the journal (every request in full); returns the messages."""
    return sum(
        len(call.messages)
        for session in fold_selected(open_store(root)).values()
        for step in session.steps
        for call in step.calls
    )


def ownloop_bytes(root: Path) -> dict[str, int]:
    parts = {"journal": tree_bytes(root / "journal"), "blobs": tree_bytes(root / "blobs")}
    parts["index"] = sum(p.stat().st_blocks * 512 for p in root.glob("index.*") if p.is_file())
    return parts


# ------------------------------------------------------------------ Inspect
def inspect_available() -> bool:
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        return False
    return True


def write_inspect(path: Path, sessions: list[list[Step]]) -> None:
    """The same sessions as an Inspect ``.eval`` log, through inspect_ai's own writer: a sample
    per session holding its conversation, and per step a model event whose input is the request
    as sent (five screenshots), images as data URIs that the writer condenses by hash."""
    import base64

    from inspect_ai.event import ModelEvent
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalSample,
        EvalSpec,
        write_eval_log,
    )
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageUser,
        ContentImage,
        GenerateConfig,
        ModelOutput,
    )

    model = "openai/uitars15-7b"
    samples = []
    for steps in sessions:
        session = steps[0].session
        conversation: list[ChatMessage] = [
            ChatMessageSystem(content=SYSTEM),
            ChatMessageUser(content=PROMPT + task(session).prompt),
        ]
        shots: list[ChatMessageUser] = []
        events = []
        output = ModelOutput()
        for st in steps:
            uri = "data:image/png;base64," + base64.b64encode(st.png).decode()
            shot = ChatMessageUser(content=[ContentImage(image=uri)])
            # The window as sent: past responses, only the last screenshots kept.
            sent = list(conversation[:2])
            for earlier in conversation[2:]:
                kept = any(earlier is shot for shot in shots[-(WINDOW - 1) :])
                if isinstance(earlier, ChatMessageUser) and not kept:
                    continue
                sent.append(earlier)
            sent.append(shot)
            output = ModelOutput.from_content(model, st.response)
            events.append(
                ModelEvent(
                    model=model,
                    input=sent,
                    tools=[],
                    tool_choice="none",
                    config=GenerateConfig(temperature=0.0, top_p=0.9, max_tokens=500),
                    output=output,
                    timestamp=st.at,
                )
            )
            shots.append(shot)
            conversation += [shot, ChatMessageAssistant(content=st.response)]
        samples.append(
            EvalSample(
                id=session,
                epoch=1,
                input=task(session).prompt,
                target="",
                messages=conversation,
                output=output,
                events=events,
            )
        )
    spec = EvalSpec(
        created=T0.isoformat(),
        task="miniwob",
        dataset=EvalDataset(name="miniwob", samples=len(sessions)),
        model=model,
        config=EvalConfig(),
    )
    write_eval_log(EvalLog(eval=spec, status="success", samples=samples), str(path))


def query_inspect(path: Path) -> list[tuple[str, int, str]]:
    from inspect_ai.event import ModelEvent
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    return sorted(
        (
            str(sample.id),
            sum(isinstance(e, ModelEvent) for e in sample.events),
            sample.output.completion,
        )
        for sample in log.samples or []
    )


# ------------------------------------------------------------------ measuring
def tree_bytes(root: Path) -> int:
    """What ``root`` takes on disk (allocated blocks: a small file costs a whole block)."""
    if root.is_file():
        return root.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in root.rglob("*") if p.is_file())


def timed(fn: Callable[[], object], repeat: int, best: bool = False) -> float:
    """The median wall time of ``fn`` in seconds (with ``best``, the shortest: what it costs
    when the machine's other load leaves it alone)."""
    times = []
    for _ in range(1 if SMOKE else repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) if best else statistics.median(times)


def cli(name: str) -> list[str] | None:
    """The command that runs ``name``: beside this Python, else on the PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return [str(beside)]
    found = shutil.which(name)
    return [found] if found else None


def cpu_timed(fn: Callable[[], object], repeat: int) -> float:
    """The median CPU time of ``fn`` in seconds, every thread of this process counted: what a
    busy machine's other work does not inflate as it does the wall time."""
    times = []
    for _ in range(1 if SMOKE else repeat):
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return statistics.median(times)


def cold(argv: list[str], repeat: int) -> tuple[float, float]:
    """The median wall and CPU time of ``argv`` in a new process (its output discarded)."""
    walls, cpus = [], []
    # As a user's shell runs it: with Python's bytecode cache (some sandboxes turn it off,
    # which adds the compiling of every module to each call). One warm-up call writes it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not SMOKE:
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    for _ in range(1 if SMOKE else repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 sessions instead of 100")
    parser.add_argument("--sessions", type=int, help="how many sessions (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="write rounds (median)")
    parser.add_argument(
        "--smoke", action="store_true", help="2 synthetic sessions of 6 steps, one round (a check)"
    )
    parser.add_argument(
        "--synthetic", action="store_true", help="distinct noisy PNGs, not real MiniWoB pages"
    )
    parser.add_argument(
        "--ownloop", help="the ownloop command for the cold CLI call (default: beside Python)"
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="only a durable append's and the per-session query's ratios (no Inspect, no "
        "format 1, no cold call)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        global SMOKE
        SMOKE = True
        args.sessions, args.rounds, args.synthetic = args.sessions or 2, 1, True
    sessions = args.sessions or (20 if args.quick else 100)
    steps = WINDOW + 1 if SMOKE else 20  # a smoke run's requests still drop screenshots
    ownloop = args.ownloop.split() if args.ownloop else cli("ownloop")
    ownloop = ownloop or [sys.executable, "-m", "ownloop"]
    with_inspect = inspect_available()
    if not with_inspect:
        print(
            "notice: inspect_ai is not installed, so Inspect's column is skipped. "
            "Install it with: pip install -e '.[bench]'"
        )
    kind = "synthetic" if args.synthetic else "real MiniWoB"
    print(f"{sessions} sessions x {steps} steps, {kind} 1280x800 PNGs ...", flush=True)
    trajs = trajectories(sessions, steps, args.synthetic)
    pngs = [st.png for s in trajs for st in s]
    print(
        f"  {len(pngs)} steps, PNGs {mb(sum(map(len, pngs)))} ({len(set(pngs))} distinct); "
        f"load {os.getloadavg()[0]:.1f}"
    )

    work = Path(tempfile.mkdtemp(prefix="ownloop-peers-"))
    try:
        if args.durable:
            report_durable(work, trajs, args.rounds)
        else:
            report(work, trajs, args.rounds, ownloop, with_inspect)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_rounds(
    work: Path, writers: dict[str, Callable[[Path], None]], rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The median wall and CPU seconds of each writer, in interleaved rounds (so the machine's
    load hits every writer alike); each leaves its last output in ``work / name / "data"``."""
    walls: dict[str, list[float]] = {name: [] for name in writers}
    cpus: dict[str, list[float]] = {name: [] for name in writers}
    for _ in range(rounds):
        for name, write in writers.items():
            target = work / name / ("log.eval" if name == "inspect" else "data")
            shutil.rmtree(target.parent, ignore_errors=True)
            target.parent.mkdir(parents=True)
            cpu = time.process_time()
            started = time.perf_counter()
            write(target)
            walls[name].append(time.perf_counter() - started)
            cpus[name].append(time.process_time() - cpu)
    return (
        {name: statistics.median(ts) for name, ts in walls.items()},
        {name: statistics.median(ts) for name, ts in cpus.items()},
    )


def report_durable(work: Path, trajs: list[list[Step]], rounds: int) -> None:
    """Issue 33's goal 6 alone: a durable append against a plain writer that fsyncs once a
    step, and the steps + last response of every session against Python over the JSON."""
    writers: dict[str, Callable[[Path], None]] = {
        "plain+fsync": lambda p: write_plain(p, trajs, fsync=True),
        "plain+fsync+pngs": lambda p: write_plain(p, trajs, fsync=True, durable_pngs=True),
        "ownloop+fsync": lambda p: write_ownloop(p, trajs, fsync=True),
        "packed+fsync": lambda p: write_ownloop(p, trajs, fsync=True, packed=True),
    }
    write_s, write_cpu = write_rounds(work, writers, rounds)
    plain, store = work / "plain+fsync" / "data", work / "ownloop+fsync" / "data"
    open_store(store).sync()
    assert query_ownloop(store) == query_plain(plain), "ownloop's answer differs"
    query_s = {
        "plain": timed(lambda: query_plain(plain), 15),
        "plain cpu": cpu_timed(lambda: query_plain(plain), 15),
        "ownloop": timed(lambda: query_ownloop(store), 15),
        "ownloop best": timed(lambda: query_ownloop(store), 15, best=True),
        "ownloop cpu": cpu_timed(lambda: query_ownloop(store), 15),
    }
    print_durable(write_s, write_cpu, query_s, len(trajs))


def print_durable(
    write_s: dict[str, float],
    write_cpu: dict[str, float],
    query_s: dict[str, float],
    sessions: int,
) -> None:
    """Goal 6's two figures, each as a ratio to its baseline measured in the same run."""
    plain, own = write_s["plain+fsync"], write_s["packed+fsync"]
    files = write_s["ownloop+fsync"]
    print(
        f"\ndurable append (record's default: the blobs in a pack): ownloop {own:.2f} s (CPU "
        f"{write_cpu['packed+fsync']:.2f} s) against a plain writer with an fsync a step "
        f"{plain:.2f} s (CPU {write_cpu['plain+fsync']:.2f} s): {own / plain:.2f}x (aim <= "
        f"1.5x); against the same writer making each PNG durable too, as the store does "
        f"{write_s['plain+fsync+pngs']:.2f} s (CPU {write_cpu['plain+fsync+pngs']:.2f} s): "
        f"{own / write_s['plain+fsync+pngs']:.2f}x; a file a blob (--keep-png) {files:.2f} s "
        f"(CPU {write_cpu['ownloop+fsync']:.2f} s): {files / plain:.2f}x"
    )
    print(
        f"steps + last response of {sessions} sessions: store.sql {query_s['ownloop']:.3f} s "
        f"warm (best {query_s['ownloop best']:.3f} s, CPU {query_s['ownloop cpu']:.3f} s; aim "
        f"<= 0.02 s) against Python over the JSON {query_s['plain']:.3f} s (CPU "
        f"{query_s['plain cpu']:.3f} s): {query_s['ownloop'] / query_s['plain']:.1f}x wall, "
        f"{query_s['ownloop cpu'] / max(query_s['plain cpu'], 1e-9):.1f}x CPU"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def report(
    work: Path,
    trajs: list[list[Step]],
    rounds: int,
    ownloop: list[str],
    with_inspect: bool,
) -> None:
    writers: dict[str, Callable[[Path], None]] = {
        "plain": lambda p: write_plain(p, trajs, fsync=False),
        "plain+fsync": lambda p: write_plain(p, trajs, fsync=True),
        "ownloop": lambda p: write_ownloop(p, trajs, fsync=False),
        "ownloop+fsync": lambda p: write_ownloop(p, trajs, fsync=True),
        "format1+fsync": lambda p: write_ownloop(p, trajs, fsync=True, format1=True),
        "packed+fsync": lambda p: write_ownloop(p, trajs, fsync=True, packed=True),
    }
    if with_inspect:
        writers["inspect"] = lambda p: write_inspect(p, trajs)
    writers["plain+fsync+pngs"] = lambda p: write_plain(p, trajs, fsync=True, durable_pngs=True)
    write_s, write_cpu = write_rounds(work, writers, rounds)
    plain, store, log = work / "plain" / "data", work / "ownloop+fsync" / "data", None
    format1 = work / "format1+fsync" / "data"
    if with_inspect:
        log = work / "inspect" / "log.eval"

    # The same answer from each.
    expected = query_plain(plain)
    open_store(store).sync()  # warm: the index exists and is up to date
    open_store(format1).sync()
    assert query_ownloop(store) == expected, "ownloop's answer differs from the plain folder's"
    assert query_requests(store) == query_requests(format1), "requests differ from format 1's"
    assert fold_requests(store) == fold_requests(format1), "folded requests differ"
    if log is not None:
        assert query_inspect(log) == expected, "Inspect's answer differs from the plain folder's"
    query_s = {
        "plain": timed(lambda: query_plain(plain), 7),
        "ownloop": timed(lambda: query_ownloop(store), 15),
        "ownloop best": timed(lambda: query_ownloop(store), 15, best=True),
        "ownloop cpu": cpu_timed(lambda: query_ownloop(store), 15),
        "plain cpu": cpu_timed(lambda: query_plain(plain), 7),
        "format1": timed(lambda: query_ownloop(format1), 15),
        "requests": timed(lambda: query_requests(store), 5),
        "requests format1": timed(lambda: query_requests(format1), 5),
        "fold": timed(lambda: fold_requests(store), 3),
        "fold format1": timed(lambda: fold_requests(format1), 3),
    }
    if log is not None:
        query_s["inspect"] = timed(lambda: query_inspect(log), 3)
    cold_s = {
        "ownloop": cold(
            [*ownloop, "sql", "--store", str(store), "--format", "csv", OWNLOOP_QUERY], 5
        )
    }
    if log is not None:
        inspect_cli = None if SMOKE else cli("inspect")  # the same measure as the next one
        if inspect_cli:
            cold_s["inspect"] = cold([*inspect_cli, "log", "dump", str(log)], 3)
        cold_s["inspect_py"] = cold(
            [
                sys.executable,
                "-c",
                "import sys; from inspect_ai.log import read_eval_log; read_eval_log(sys.argv[1])",
                str(log),
            ],
            3,
        )

    disk = {"plain": tree_bytes(plain), "ownloop": tree_bytes(store)}
    parts = ownloop_bytes(store)
    parts1 = ownloop_bytes(format1)
    if log is not None:
        disk["inspect"] = tree_bytes(log)
    # The default: the same writes with each session's screenshots compacted in the background
    # as it ends (record's default; the store above is what record --keep-png leaves).
    default = work / "default" / "data"
    default.parent.mkdir()
    write_s["default"], end = write_default(default, trajs)
    open_store(default).sync()
    assert query_ownloop(default) == expected, "the compacted store's answer differs"
    compacted = ownloop_bytes(default)
    print(
        f"  background compaction: {end.compacted} screenshots, CPU {end.cpu_s:.1f} s (lowest "
        f"priority), writes with it running beside them {write_s['default']:.2f} s against "
        f"{write_s['ownloop+fsync']:.2f} s; load {os.getloadavg()[0]:.1f}"
    )
    print_table(write_s, query_s, cold_s, disk, parts, compacted, log is not None)
    print_formats(write_s, query_s, disk["plain"], parts, parts1)
    print_durable(write_s, write_cpu, query_s, len(trajs))


def print_table(
    write_s: dict[str, float],
    query_s: dict[str, float],
    cold_s: dict[str, tuple[float, float]],
    disk: dict[str, int],
    parts: dict[str, int],
    compacted: dict[str, int] | None,
    with_inspect: bool,
) -> None:
    plain_bytes = disk["plain"]

    def share(n: int) -> str:
        return f"{n / plain_bytes:.2f}"

    def split(p: dict[str, int]) -> str:
        return ", ".join(f"{k} {mb(v)}" for k, v in p.items())

    skipped = "(not installed)"
    rows = [
        (
            "bytes on disk (ownloop: `record --keep-png`, PNGs as captured)",
            f"1.00 ({mb(plain_bytes)})",
            share(disk["inspect"]) if with_inspect else skipped,
            f"{share(sum(parts.values()))} ({split(parts)})",
        )
    ]
    if compacted is not None:
        rows.append(
            (
                "bytes at the run's end (ownloop's default: compacted in the background)",
                "",
                "",
                f"{share(sum(compacted.values()))} ({split(compacted)})",
            )
        )
    steps = "write time"
    rows.append(
        (
            steps,
            f"1.0 ({write_s['plain']:.2f} s; {write_s['plain+fsync']:.2f} s with an fsync a step)",
            f"{write_s['inspect'] / write_s['plain']:.1f}x" if with_inspect else skipped,
            f"{write_s['ownloop+fsync'] / write_s['plain+fsync']:.1f}x with fsync, "
            f"{write_s['ownloop'] / write_s['plain']:.1f}x without",
        )
    )
    rows.append(
        (
            "steps + last response of every session",
            f"{query_s['plain']:.3f} s (Python over the JSON)",
            f"{query_s['inspect']:.3f} s (read_eval_log)" if with_inspect else skipped,
            f"{query_s['ownloop']:.3f} s (store.sql, warm; best {query_s['ownloop best']:.3f} s, "
            f"CPU {query_s['ownloop cpu']:.3f} s)",
        )
    )

    def took(name: str) -> str:
        wall, cpu = cold_s[name]
        return f"{wall:.2f} s (CPU {cpu:.2f} s)"

    inspect_cold = skipped
    if with_inspect:
        said = [f"`python -c read_eval_log` {took('inspect_py')}"]
        if "inspect" in cold_s:
            said.insert(0, f"`inspect log dump` {took('inspect')}")
        inspect_cold = "; ".join(said)
    rows.append(("a cold CLI call", "", inspect_cold, f"`ownloop sql` {took('ownloop')}"))
    print_rows(("figure", "plain folder (seed layout)", "Inspect `.eval`", "ownloop"), rows)


def print_formats(
    write_s: dict[str, float],
    query_s: dict[str, float],
    plain_bytes: int,
    parts: dict[str, int],
    parts1: dict[str, int],
) -> None:
    """Journal format 2 (requests written compactly) against format 1, in the same run."""

    def bytes_of(p: dict[str, int]) -> str:
        split = ", ".join(f"{k} {mb(v)}" for k, v in p.items())
        return f"{sum(p.values()) / plain_bytes:.2f} ({split})"

    rows = [
        ("bytes (of the plain folder)", bytes_of(parts1), bytes_of(parts)),
        (
            "write time with fsync",
            f"{write_s['format1+fsync']:.2f} s",
            f"{write_s['ownloop+fsync']:.2f} s",
        ),
        (
            "steps + last response (store.sql, warm)",
            f"{query_s['format1']:.3f} s",
            f"{query_s['ownloop']:.3f} s",
        ),
        (
            f"every request in full (`{REQUESTS_QUERY}`)",
            f"{query_s['requests format1']:.3f} s",
            f"{query_s['requests']:.3f} s",
        ),
        (
            "every session folded from the journal",
            f"{query_s['fold format1']:.3f} s",
            f"{query_s['fold']:.3f} s",
        ),
    ]
    print_rows(
        ("ownloop's journal", "format 1 (requests in full)", "format 2 (compact requests)"), rows
    )


def print_rows(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A Markdown table, then the machine's load."""
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
