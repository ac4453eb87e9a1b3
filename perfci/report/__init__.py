"""Renderers of a comparison: they format results they are handed and do no I/O of their own.

- :mod:`.markdown`: the pull-request comment and the job summary (Jinja2, ``templates/``)
- :mod:`.console`: the terminal (Rich)
- :mod:`.json_report`: a JSON-ready dict for ``perfci compare --json`` and the HTTP API
- :mod:`.escape`: making untrusted names inert in Markdown
"""
