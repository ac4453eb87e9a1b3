"""Answers people give back on a pull request (issue 34): ``/perfci accept``,
``false-alarm`` and ``rerun`` comments, carried out by :mod:`.answer`, and what a later check
and the weekly report make of them (:mod:`.accepted`). ``docs/answers.md`` is the user's page.
"""
