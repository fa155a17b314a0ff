"""The Dagster instance's SQLite storage, with an event log that writes a batch in one go
(``dagster.yaml`` names it: ``storage: custom``; decision D98).

Dagster's SQLite event log builds a SQLAlchemy engine for every write, so every statement is
compiled afresh, and writes a batch of events one event at a time: about 12 ms of CPU per
event. A run over 113 weeks plans 1,539 asset partitions and checks before its first step
starts, and each weekly step reports 113 materializations: half a minute of CPU on 2 cores.
``BatchedSqliteEventLog`` keeps one engine per database file for the life of the storage
(``NullPool``: each write still opens and closes its own SQLite connection, so no connection
is shared between threads or processes) and writes a batch (Dagster batches a run's planned
events and a step's partition materializations when ``DAGSTER_EVENT_BATCH_SIZE`` is set) in
one transaction per database file, with the rows that writing the events one by one makes.
The run, schedule and index files and their schema are Dagster's own: an instance written
with ``storage: sqlite`` reads the same. It subclasses Dagster's storage classes, whose
internals are not a public API: Dagster is pinned (constraints.txt), and the oracle test
(tests/dagster/test_instance_storage.py) fails if an upgrade changes what a batch must write.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import yaml
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import (
    SqliteScheduleStorage,
)
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlalchemy_compat import db_result
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import (
    DagsterSqliteStorage,
    _event_logs_directory,
    _runs_directory,
    _schedule_directory,
)
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

# Dagster hands a batch to ``store_event_batch`` only when this is set (events per batch).
BATCH_SIZE_VARIABLE = "DAGSTER_EVENT_BATCH_SIZE"
os.environ.setdefault(BATCH_SIZE_VARIABLE, "10000")
MIRRORED = frozenset(ASSET_EVENTS | ASSET_CHECK_EVENTS)


class BatchedSqliteEventLog(SqliteEventLogStorage):
    """Dagster's SQLite event log with one engine per database file and batched writes."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self._engines: dict[str, Engine] = {}
        super().__init__(base_dir, inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> BatchedSqliteEventLog:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # Dagster's ``_connect`` with the engine kept: same lock, same first-use schema check,
        # same transaction per use.
        with self._db_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = create_engine(
                    self.conn_string_for_shard(shard),
                    poolclass=NullPool,
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
                )
                self._engines[shard] = engine
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        """``store_event`` of each event, in one transaction per database file. Anything but
        the asset and check events of one run (what Dagster batches) is written one by one."""
        if not _batchable(events):
            super().store_event_batch(events)
            return
        statements = [self.prepare_insert_event(event) for event in events]
        with self.run_connection(events[0].run_id) as conn:
            for statement in statements:
                conn.execute(statement)
        checks = []
        with self.index_transaction() as conn:  # the index mirrors asset and check events
            for event, statement in zip(events, statements, strict=True):
                with db_result(conn, statement) as result:
                    event_id = result.inserted_primary_key[0]
                if event.dagster_event_type in ASSET_CHECK_EVENTS:
                    checks.append((event, event_id))
                else:
                    self._store_asset_event_tags(conn, [event], [event_id])
                    self._store_asset_event(conn, event, event_id)
        for event, event_id in checks:  # opens its own index transaction
            self.store_asset_check_event(event, event_id)

    def dispose(self) -> None:
        super().dispose()
        for engine in self._engines.values():
            engine.dispose()
        self._engines.clear()


def _batchable(events: Sequence[EventLogEntry]) -> bool:
    """Asset and check events of one run: what ``store_event`` mirrors into the index and
    nothing else (run status changes also update the run table)."""
    return len({event.run_id for event in events}) == 1 and all(
        event.is_dagster_event and event.dagster_event_type in MIRRORED for event in events
    )


class SqliteStorage(DagsterSqliteStorage):
    """``storage: sqlite`` with ``BatchedSqliteEventLog`` as its event log; same files."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None):
        self.base_dir = base_dir
        self._run_storage = SqliteRunStorage.from_local(_runs_directory(base_dir))
        self._event_log_storage = BatchedSqliteEventLog(_event_logs_directory(base_dir))
        self._schedule_storage = SqliteScheduleStorage.from_local(_schedule_directory(base_dir))
        self._inst_data = inst_data
        super(DagsterSqliteStorage, self).__init__()

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> SqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)

    @property
    def event_storage_data(self) -> ConfigurableClassData:
        config = yaml.dump({"base_dir": _event_logs_directory(self.base_dir)})
        return ConfigurableClassData(__name__, BatchedSqliteEventLog.__name__, config)
