"""``python -m perfci``: the same as the ``perfci`` command."""

from perfci.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
