"""Use cases: where formats, store, analysis, report and the integrations meet. The CLI and the
server call only these, so that the two can never disagree. Grouped by job:

- ``check``: run the benchmark (repeats, same-runner A/B, adaptive looks) and publish the answer;
- ``submit``: a run's way in (files, uploads), its storage and its comparison with the baseline;
- ``browse``: what the dashboard, ``perfci compare`` and ``perfci runs`` read;
- ``weekly``: the trend report of the main branch;
- ``admin``: the store's schema and retention, projects and tokens;
- ``history``: runs kept on a git branch, and histories imported from other tools;
- ``stores``: a unit of work on the configured store, for the commands that need one.
"""
