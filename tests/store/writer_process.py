"""A recorder-like writer process for the store's process tests (not a test module).

    python writer_process.py STORE SESSION EVENTS BATCH FSYNC PAYLOAD_BYTES [blobs|packed]

Appends EVENTS ModelCalled events of session SESSION to a new stream of STORE, BATCH at a time,
and after each append returns prints ``acked <total>`` on stdout: every event it counted is
durable in the journal. With ``blobs``, each batch is a step that first stores a new blob of
PAYLOAD_BYTES and names it in a ScreenshotTaken ahead of its ModelCalled events (as a recorder's
step does: the line's fsync is the step's only one where the file system allows). With
``packed``, the blobs go to a pack as a recorder's do by default (``BlobStore.start_packing``).
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime

from ownloop.store import events as E
from ownloop.store import open_store


def main() -> None:
    root, session, total, batch, fsync, payload = sys.argv[1:7]
    with_blobs = sys.argv[7:] in (["blobs"], ["packed"])
    store = open_store(root, fsync=fsync == "1")
    if sys.argv[7:] == ["packed"]:
        assert store.blobs.start_packing()
    text = "x" * int(payload)
    done = 0
    with store.stream(f"start-{session}") as stream:  # the run and session it writes for
        stream.append(
            [
                E.RunStarted(at=datetime.now(UTC), run_id="r"),
                E.SessionStarted(
                    at=datetime.now(UTC),
                    run_id="r",
                    session_id=session,
                    task=E.Task(task_id=session, prompt="", start_url=""),
                ),
            ]
        )
    with store.stream() as stream:
        while done < int(total):
            n = min(int(batch), int(total) - done)
            step: list[E.Event] = []
            if with_blobs:
                sha = store.put_blob(os.urandom(int(payload)))
                step.append(
                    E.ScreenshotTaken(
                        at=datetime.now(UTC), run_id="r", session_id=session, step=done, sha256=sha
                    )
                )
            stream.append(
                step
                + [
                    E.ModelCalled(
                        at=datetime.now(UTC),
                        run_id="r",
                        session_id=session,
                        step=done + i,
                        call_id=f"{session}-{done + i}",
                        response=text,
                    )
                    for i in range(n)
                ]
            )
            done += n
            sys.stdout.write(f"acked {done}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
