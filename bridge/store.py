"""The job store: one SQLite file (WAL) that schedulers, keepers and the CLI share (docs/STORE.md).

Only the standard library: a keeper, the CLI and the Node client's helper open it cheaply.
Every connection is in autocommit mode; the few read-modify-write steps (claiming a queued
job and its slots, cancelling) run in BEGIN IMMEDIATE transactions that hold the write lock
for well under a millisecond. The live event stream never goes through here: a keeper writes
each job's events to a file in the job's directory (docs/STORE.md "Events file"), and the
row's stage and progress are coalesced copies.

The schema is versioned with PRAGMA user_version; MIGRATIONS[n] takes version n to n+1.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from typing import Any, Optional

from trainbridge.bridge import jsonform, private_files, store_errors
from trainbridge.bridge.store_errors import StoreError as StoreError  # re-exported

SCHEMA_VERSION = 4
BUSY_TIMEOUT_MS = 5000

# Job states in the row: the Job's own (starting, running, stalled, ended) plus queued and
# restarting (between two attempts, while the backoff runs).
ACTIVE = ("starting", "running", "stalled", "restarting")
STATES = ("queued",) + ACTIVE + ("ended",)

# Row columns stored as JSON text.
JSON_COLUMNS = (
    "command",
    "env_names",
    "config",
    "resources",
    "assigned",
    "progress",
    "report",
    "tags",
    "meta",
)

MIGRATIONS = [
    # 0 -> 1: the first schema.
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        command TEXT NOT NULL,
        cwd TEXT,
        env_names TEXT,
        config TEXT NOT NULL,
        resources TEXT NOT NULL,
        assigned TEXT,
        priority INTEGER NOT NULL DEFAULT 0,
        max_restarts INTEGER NOT NULL DEFAULT 0,
        restart_backoff REAL NOT NULL DEFAULT 1.0,
        state TEXT NOT NULL,
        outcome TEXT,
        exit_code INTEGER,
        signal TEXT,
        stage TEXT,
        progress TEXT,
        note TEXT,
        submitted_at REAL NOT NULL,
        started_at REAL,
        ended_at REAL,
        updated_at REAL NOT NULL,
        attempt INTEGER NOT NULL DEFAULT 0,
        keeper_pid INTEGER,
        keeper_start REAL,
        job_pid INTEGER,
        job_start REAL,
        endpoint TEXT,
        dir TEXT NOT NULL,
        log_path TEXT NOT NULL,
        events_path TEXT NOT NULL,
        cancel_requested INTEGER NOT NULL DEFAULT 0,
        report TEXT
    );
    CREATE INDEX jobs_by_state ON jobs (state, priority, seq);
    CREATE TABLE attempts (
        job_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        started_at REAL,
        ended_at REAL,
        outcome TEXT,
        exit_code INTEGER,
        signal TEXT,
        report TEXT,
        PRIMARY KEY (job_id, attempt)
    );
    CREATE TABLE settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 1 -> 2: a cancel's own reason and grace (Scheduler.cancel, an attached job's cancel()),
    # which the keeper passes to its Job's cancel().
    """
    ALTER TABLE jobs ADD COLUMN cancel_reason TEXT;
    ALTER TABLE jobs ADD COLUMN cancel_grace REAL
    """,
    # 2 -> 3: what a GUI keeps with a job instead of a mapping of its own: a name, tags (a
    # JSON list of strings) and free metadata (a JSON object), given at submit.
    """
    ALTER TABLE jobs ADD COLUMN name TEXT;
    ALTER TABLE jobs ADD COLUMN tags TEXT;
    ALTER TABLE jobs ADD COLUMN meta TEXT
    """,
    # 3 -> 4: end_pending, 1 while the row says ended and its keeper has still to write the
    # feed's end line (it writes the row's end first): a face waits for that line instead of
    # judging whether the keeper still runs; reconcile() writes it for a keeper gone meanwhile.
    """
    ALTER TABLE jobs ADD COLUMN end_pending INTEGER;
    CREATE INDEX jobs_end_pending ON jobs (end_pending) WHERE end_pending IS NOT NULL
    """,
]


def default_path() -> str:
    """$TRAINBRIDGE_STORE, else <per-user data dir>/trainbridge/jobs.db (XDG on Linux)."""
    explicit = os.environ.get("TRAINBRIDGE_STORE")
    if explicit:
        return explicit
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
    elif os.uname().sysname == "Darwin":
        base = os.path.expanduser("~/Library/Application Support")
    else:
        base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(base, "trainbridge", "jobs.db")


class Store:
    """One connection to the store file. Not shared between threads: open one per thread."""

    def __init__(self, path: Optional[str] = None, create: bool = True):
        """Open the store at `path` (default: default_path()), made if it is not there unless
        create=False (then StoreMissing). A store on a read-only file system, or whose files
        this user may read but not write, opens for reading: `read_only` is True and any
        write raises StoreReadOnly. Every failure is a StoreError (bridge/store_errors.py)."""
        self.path = os.path.abspath(path or default_path())
        self.jobs_dir = os.path.join(os.path.dirname(self.path), "jobs")
        self.read_only = False
        if not create and not os.path.exists(self.path):
            raise store_errors.missing(self.path)
        why: Optional[StoreError]
        try:
            _make_private(
                self.path, own_dir=path is None or self.path == os.path.abspath(default_path())
            )
        except (
            store_errors.StoreReadOnly,
            store_errors.StoreAccess,
            store_errors.StoreFull,
        ) as exc:
            if isinstance(exc, store_errors.StoreNotPrivate) or not (
                os.path.isfile(self.path) and os.access(self.path, os.R_OK)
            ):
                raise  # another account's store is refused, never read
            self.read_only, why = True, exc  # it exists and can be read: the reads work
        else:
            why = None
        try:
            connection = self._connect()
        except (
            store_errors.StoreFull,
            store_errors.StoreReadOnly,
            store_errors.StoreAccess,
        ) as exc:
            # WAL's files cannot be made beside it (a full disk, a read-only folder): when
            # the store itself can be read, read it as it is.
            readable = os.path.isfile(self.path) and os.access(self.path, os.R_OK)
            writable = os.access(self.path, os.W_OK) and os.access(
                os.path.dirname(self.path), os.W_OK
            )
            if not readable or (isinstance(exc, store_errors.StoreAccess) and writable):
                raise
            self.read_only = True
            why = exc if isinstance(exc, store_errors.StoreFull) else why
            connection = self._connect()
        if not (os.access(self.path, os.W_OK) and os.access(os.path.dirname(self.path), os.W_OK)):
            self.read_only = True  # opened (its WAL files were there), but it cannot change
        self.db = _Db(connection, self.path, why)
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        try:
            if self.read_only:
                db = _connect_read_only(self.path)
            else:
                db = sqlite3.connect(
                    self.path,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
            db.row_factory = sqlite3.Row
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if not self.read_only:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA user_version").fetchone()  # reads the header: a damaged one fails
            return db
        except sqlite3.Error as exc:
            raise store_errors.explain(self.path, exc) from exc

    def _migrate(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise store_errors.StoreTooNew(
                f"the job store {self.path} has schema version {version}; this trainbridge "
                f"knows up to {SCHEMA_VERSION}: upgrade trainbridge (pip install -U trainbridge)",
                self.path,
            )
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            raise store_errors.StoreReadOnly(
                f"the job store {self.path} was written by an older trainbridge and is "
                f"read-only here: open it once with write access, which upgrades it",
                self.path,
            )
        self.db.execute("BEGIN IMMEDIATE")
        try:
            version = self.db.execute("PRAGMA user_version").fetchone()[0]  # another won?
            while version < SCHEMA_VERSION:
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                version += 1
                self.db.execute(f"PRAGMA user_version = {version}")
            self.db.execute("COMMIT")
        except BaseException:
            _rollback(self.db)
            raise

    def close(self) -> None:
        self.db.close()

    # --- transactions ---------------------------------------------------------------------
    def transaction(self) -> _Tx:
        """`with store.transaction():` a BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error)."""
        return _Tx(self.db)

    # --- rows -----------------------------------------------------------------------------
    def insert_job(self, row: dict[str, Any]) -> None:
        row = _encode(row)
        row.setdefault("updated_at", time.time())
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.transaction():
            seq = self.db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            self.db.execute(
                f"INSERT INTO jobs (seq, {names}) VALUES (?, {marks})", [seq, *row.values()]
            )

    def update(
        self, job_id: str, where_state: Optional[Iterable[str]] = None, **fields: Any
    ) -> bool:
        """Set fields of one job (only while its state is one of where_state, if given).
        True when the row was changed."""
        fields = _encode(fields)
        fields["updated_at"] = time.time()
        sets = ", ".join(f"{name} = ?" for name in fields)
        sql = f"UPDATE jobs SET {sets} WHERE id = ?"
        args: list[Any] = [*fields.values(), job_id]
        if where_state is not None:
            states = list(where_state)
            sql += f" AND state IN ({', '.join('?' for _ in states)})"
            args += states
        return self.db.execute(sql, args).rowcount == 1

    def get(self, job_id: str) -> Optional[dict[str, Any]]:
        row = self.db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _decode(row) if row else None

    def jobs(
        self, state: Optional[Any] = None, limit: Optional[int] = None, tag: Optional[str] = None
    ) -> list[dict[str, Any]]:
        """Jobs, newest first. state: one state, a list of states, or "active"; tag: only
        the jobs submitted with that tag."""
        sql = "SELECT * FROM jobs"
        args: list[Any] = []
        where = []
        if state is not None:
            states = (
                list(ACTIVE)
                if state == "active"
                else [state]
                if isinstance(state, str)
                else list(state)
            )
            where.append(f"state IN ({', '.join('?' for _ in states)})")
            args += states
        if tag is not None:
            where.append("EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value = ?)")
            args.append(tag)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(int(limit))
        return [_decode(row) for row in self.db.execute(sql, args).fetchall()]

    def queued(self) -> list[dict[str, Any]]:
        """Queued jobs in the order they start: priority (high first), then submission."""
        rows = self.db.execute(
            "SELECT * FROM jobs WHERE state = 'queued' ORDER BY priority DESC, seq ASC"
        ).fetchall()
        return [_decode(row) for row in rows]

    def ends_pending(self) -> list[dict[str, Any]]:
        """The rows that say ended whose feed's end line their keeper has still to write."""
        rows = self.db.execute("SELECT * FROM jobs WHERE end_pending IS NOT NULL").fetchall()
        return [_decode(row) for row in rows]

    def delete(self, job_id: str) -> None:
        with self.transaction():
            self.db.execute("DELETE FROM attempts WHERE job_id = ?", (job_id,))
            self.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    # --- attempts -------------------------------------------------------------------------
    def put_attempt(self, job_id: str, attempt: int, **fields: Any) -> None:
        fields = _encode(fields)
        names = ", ".join(fields)
        marks = ", ".join("?" for _ in fields)
        self.db.execute(
            f"INSERT OR REPLACE INTO attempts (job_id, attempt, {names}) VALUES (?, ?, {marks})",
            [job_id, attempt, *fields.values()],
        )

    def attempts(self, job_id: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT * FROM attempts WHERE job_id = ? ORDER BY attempt", (job_id,)
        ).fetchall()
        return [_decode(row) for row in rows]

    # --- settings -------------------------------------------------------------------------
    def setting(self, name: str, default: Any = None) -> Any:
        """A setting's value (a stored null is None), or `default` when it was never set."""
        row = self.db.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, name: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO settings (name, value) VALUES (?, ?)",
            (name, json.dumps(value, ensure_ascii=True)),
        )

    def note_boot(self, boot: Optional[str]) -> bool:
        """Remember this machine's boot (procfs.boot_id): True when the store had seen
        another, so the machine restarted since and every process its rows name is gone (a
        pid with its start after boot names a process on one boot only). Once per boot: the
        first caller after a restart gets True."""
        if boot is None or self.setting("boot") == boot:
            return False
        with self.transaction():
            seen = self.setting("boot")
            self.set_setting("boot", boot)
        return seen is not None and seen != boot


class _Db:
    """The store's connection, each SQLite error turned into a StoreError that says why
    (a full disk, a damaged file, a read-only store) at the one place every query passes.
    `why`: why a store was opened for reading only (a full disk, say), which a write then
    raises instead of SQLite's "readonly database"."""

    def __init__(self, db: sqlite3.Connection, path: str, why: Optional[Exception] = None):
        self._db = db
        self._path = path
        self._why = why

    def execute(self, sql: str, args: Any = ()) -> _Cursor:
        try:
            return _Cursor(self._db.execute(sql, args), self._path)
        except sqlite3.Error as exc:
            error = store_errors.explain(self._path, exc)
            if isinstance(error, store_errors.StoreReadOnly) and isinstance(
                self._why, store_errors.StoreError
            ):
                error = type(self._why)(str(self._why), self._path)
            raise error from exc

    def close(self) -> None:
        self._db.close()


class _Cursor:
    def __init__(self, cursor: sqlite3.Cursor, path: str):
        self._cursor = cursor
        self._path = path
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.Error as exc:  # a damaged page met while stepping
            raise store_errors.explain(self._path, exc) from exc

    def fetchall(self) -> list[Any]:
        try:
            return self._cursor.fetchall()
        except sqlite3.Error as exc:
            raise store_errors.explain(self._path, exc) from exc

    def __iter__(self) -> Any:
        return iter(self.fetchall())


def _connect_read_only(path: str) -> sqlite3.Connection:
    """A read-only connection. A WAL store whose folder cannot be written has no -shm to map:
    then `immutable` (nothing can change a file on a read-only file system anyway)."""
    from urllib.parse import quote

    uri = f"file:{quote(path)}?mode=ro"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
        return sqlite3.connect(
            uri + "&immutable=1", uri=True, isolation_level=None, check_same_thread=False
        )


def _make_private(path: str, own_dir: bool) -> None:
    """The store's files readable by this user only (docs/SECURITY.md): a new store file is
    created 0600 before SQLite opens it (SQLite gives its -wal and -shm the same mode), the
    jobs directory 0700 and, for the default store, its data directory too. An existing store
    with looser modes is tightened; one another account owns with loose modes is refused."""
    directory = os.path.dirname(path)
    jobs_dir = os.path.join(directory, "jobs")
    try:
        os.makedirs(directory, mode=private_files.DIR_MODE, exist_ok=True)
        if own_dir:  # the per-user data dir is trainbridge's; a --store's directory is the user's
            private_files.tighten(directory, private_files.DIR_MODE)
        os.makedirs(jobs_dir, mode=private_files.DIR_MODE, exist_ok=True)
        private_files.tighten(jobs_dir, private_files.DIR_MODE)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            os.close(os.open(path, flags, private_files.FILE_MODE))
        except FileExistsError:
            for name in (path, f"{path}-wal", f"{path}-shm"):
                private_files.tighten(name, private_files.FILE_MODE)
    except private_files.PrivateFileError as exc:
        raise store_errors.StoreNotPrivate(
            f"cannot use the job store {path}: {exc.strerror}. The store holds every job's command "
            f"line and output: it must be this user's and readable by it only "
            f"(chmod 600 {path}*; chmod 700 {jobs_dir})",
            path,
        ) from exc
    except OSError as exc:  # a full disk, a read-only or missing directory: said as it is
        if exc.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM):
            raise store_errors.explain(path, exc) from exc
        raise StoreError(
            f"cannot use the job store {path}: {private_files.error_text(exc)}", path
        ) from exc


class _Tx:
    def __init__(self, db: _Db):
        self.db = db

    def __enter__(self) -> _Db:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: Optional[type], value: Any, tb: Any) -> None:
        if kind is None:
            self.db.execute("COMMIT")
        else:
            _rollback(self.db)


def _rollback(db: _Db) -> None:
    """ROLLBACK after a failure; SQLite may have ended the transaction itself (a full disk
    does), and the first error, which says why, is the one to raise."""
    try:
        db.execute("ROLLBACK")
    except StoreError:
        pass


def _encode(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, value in fields.items():
        if name in JSON_COLUMNS and value is not None:
            value = jsonform.dumps(value, default=str)
        out[name] = value
    return out


def _decode(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for name in JSON_COLUMNS:
        if out.get(name) is not None:
            out[name] = jsonform.loads(out[name])
    return out
