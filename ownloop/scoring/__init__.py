"""How much a score can be trusted: the statistics of pass/fail outcomes, pure functions.

``stats``: Wilson intervals, pass@k and pass^k, the task-clustered and paired bootstraps,
McNemar's exact test. ``paired``: two runs over the same tasks, the paired t interval, the
sign-flip permutation test, Fisher's exact test per task with Holm's correction.

This part stands below the store, which keeps each run's bootstrap in its index at every sync
(``ownloop/store/scores.py``), and imports nothing of ours. The commands that print these
figures (``compare``, the dashboard) stand above the replay.
"""
