"""The one exception family the library raises for things a user can fix.

Each carries one line that says what to do, and the CLI prints it as is (STYLE §7). The whole
tree, by part, each with when it is raised (``tests/test_errors.py`` checks that it names
every subclass in the package, under its own base):

* OwnloopError
  * NoStore - store: ``open_store(create=False)`` finds no store at the path.
  * StoreNotWritable - store: the disk refuses a write the store needs (full, read-only).
  * MissingBlob - store: a blob asked for is not in the store (or its pixels are unreadable).
  * ImageTooLarge - store: an image is over the pixel budget, so it is not decoded.
  * IndexBusy - store: another process held the index lock past the bounded wait.
  * QueryError - store: ``ownloop sql`` was given a write, or DuckDB rejected the query.
  * RunIsSealed - store: something tried to append to a sealed run.
  * BrokenReference - store: a compact request names a line or message not in its stream.
  * ClaimError - store: the claims folder (who runs which task) cannot be written.
  * MissingExtra - store: a command needs a package that only an install extra brings.
  * GraderSpecError - grading: a ``--grader`` spec cannot be read; shows a valid one.
  * WorldLost - world: the world stops answering mid-task (the session ends ``env_error``).
  * ChromiumNotFound - world: no Chromium at ``--chromium``/``$OWNLOOP_CHROMIUM``, or none found.
  * BrowserFailed - world: the page or browser cannot do what a suite or the recorder asks.
  * RenderRefused - world: a desktop action's arguments are not what a call may take.
  * SuiteError - world: ``--suite``, ``--tasks``, ``--base`` and ``--seeds`` do not go together.
  * EnvironmentNotFound - world: no suite of that name (nor an installed entry point).
  * MiniwobError - world: MiniWoB is not installed, a bad ``--seeds``, or a task unseeded.
  * TasksFileError - world: a tasks file cannot be read (names the file and JSON path).
  * OsworldTaskError - world: an OSWorld task folder or file ownloop cannot run.
  * SetupFailed - world: the desktop server did not carry out an OSWorld setup step.
  * AdmissionRefused - recorder: the run may not start (a dirty tree, another suite or contract).
  * EndpointUnusable - recorder: the endpoint is unreachable, refuses the key, lacks the model.
  * TargetNotFound - replay: no session or task has the id given.
  * NotReplayable - replay: the session lacks what the mode re-executes (actions, responses).
  * NoSessionEvents - replay: there is nothing to fold for the session asked for.
  * ReplayError - replay: replay options that do not fit the session or each other.
  * CassetteError - replay: no recorded responses to serve, or a bad ``--on-miss``.
  * JudgeError - replay: a judge file cannot be made into a judge, or its answer read.
  * UnknownExpert - modelserver: ``serve-model --expert`` names no expert, or the wrong agent.
  * UnplannableTask - modelserver: the scripted expert has no plan for the task's page.
  * FaultSpecError - modelserver: a ``--faults`` spec cannot be read.
  * ServerNotStarted - modelserver: the model server's URL is asked for before ``start()``.
  * DesktopError - desktopserver: the test desktop cannot start, reset or take the options.
"""

__all__ = ["OwnloopError"]


class OwnloopError(Exception):
    """A problem with a one-line message that says what to do. The CLI prints it as is."""
