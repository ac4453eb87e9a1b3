"""The store's unit of work: what a use case stores together is one transaction.

Use cases never handle SQLAlchemy themselves (the import contracts forbid it): they wrap what
must be stored together in ``with unit_of_work(session):``. The block's writes are committed
when it ends and all rolled back when anything in it raises; a database error comes out as
:class:`~perfci.core.errors.DatabaseFailure` (a unique key taken by a concurrent writer as
:class:`~perfci.core.errors.KeyTaken`), so a use case can tell "someone else stored it first"
from a failure without knowing the driver.

Units nest: an inner unit (an ingest) inside an outer one (the ingest and its comparison)
commits nothing itself; the outermost commits. This replaces the ``commit: bool`` flags that
let a caller keep a transaction open.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from perfci.core.errors import DatabaseFailure, KeyTaken
from perfci.store.engines import error_reason

__all__ = ["Engine", "Session", "SessionFactory", "reading", "unit_of_work"]

#: What hands out sessions on one store (the types use cases name, without SQLAlchemy).
SessionFactory = sessionmaker[Session]

_DEPTH = "perfci_unit_depth"


@contextmanager
def unit_of_work(session: Session, *, keep: bool = True) -> Iterator[Session]:
    """One transaction on ``session``: committed at the end of the outermost unit, rolled
    back whole on any error (module doc). ``keep=False`` (a dry run) rolls it back at the end
    too, after the block has seen what it would change."""
    depth = session.info.get(_DEPTH, 0)
    session.info[_DEPTH] = depth + 1
    try:
        yield session
        if depth == 0:
            if keep:
                session.commit()
            else:
                session.rollback()
    except IntegrityError as exc:
        session.rollback()
        raise KeyTaken(error_reason(exc)) from exc
    except DBAPIError as exc:
        session.rollback()
        raise DatabaseFailure(error_reason(exc)) from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.info[_DEPTH] = depth


@contextmanager
def reading(session: Session) -> Iterator[Session]:
    """Reads whose transaction ends with the block (nothing to keep: rolled back, which on
    SQLite also frees the write lock every transaction takes); inside an open unit of work
    the reads are part of that unit and end with it."""
    if session.info.get(_DEPTH, 0):
        yield session
        return
    try:
        yield session
    finally:
        session.rollback()
