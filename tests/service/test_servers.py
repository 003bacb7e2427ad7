"""The test servers themselves: if these fail, every service test's verdict is suspect."""

from __future__ import annotations

import os

import pytest
import redis
import sqlalchemy as sa

from helpers.servers import PostgresServer, RedisServer

pytestmark = pytest.mark.service


@pytest.fixture
def own_redis(tmp_path):
    """A Redis of this test's own, since these tests stop and restart it."""
    if not RedisServer.is_available():
        pytest.fail("redis-server is not installed: run bash scripts/setup.sh", pytrace=False)
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


def test_redis_url_is_an_empty_database(redis_server, redis_url):
    with redis.Redis.from_url(redis_url) as client:
        assert client.dbsize() == 0
        client.set("k", "v")
        assert client.get("k") == b"v"
    assert redis_url == redis_server.url


def test_redis_url_is_flushed_between_tests(redis_url):
    with redis.Redis.from_url(redis_url) as client:
        assert client.get("k") is None


def test_redis_restart_keeps_data_on_the_same_port(own_redis):
    url = own_redis.url
    with redis.Redis.from_url(url) as client:
        client.set("k", "v")
    own_redis.restart()
    assert own_redis.url == url
    with redis.Redis.from_url(url) as client:
        assert client.get("k") == b"v"


def test_redis_survives_sigkill_with_fsynced_aof(own_redis):
    with redis.Redis.from_url(own_redis.url) as client:
        client.set("k", "v")
    own_redis.kill()
    with pytest.raises(redis.ConnectionError), redis.Redis.from_url(own_redis.url) as client:
        client.ping()
    own_redis.start()
    with redis.Redis.from_url(own_redis.url) as client:
        assert client.get("k") == b"v"


def test_redis_restart_without_data_comes_back_empty(own_redis):
    with redis.Redis.from_url(own_redis.url) as client:
        client.set("k", "v")
    own_redis.restart(keep_data=False)
    with redis.Redis.from_url(own_redis.url) as client:
        assert client.get("k") is None
        assert client.dbsize() == 0


def test_redis_stop_leaves_no_process(tmp_path):
    server = RedisServer(tmp_path).start()
    pid = server.proc.pid
    server.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_database_url_round_trip(database_url):
    engine = sa.create_engine(database_url)
    try:
        with engine.begin() as conn:
            assert not sa.inspect(conn).get_table_names()  # empty for each test
            conn.execute(sa.text("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT)"))
            conn.execute(sa.text("INSERT INTO t VALUES (1, 'ünï')"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT name FROM t")).scalar_one() == "ünï"
    finally:
        engine.dispose()


def test_postgres_default_url_names_the_grader_database(postgres_server):
    engine = sa.create_engine(postgres_server.url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_database(), current_user")).one() == ("grader", "grader")
            assert conn.execute(sa.text("SHOW server_encoding")).scalar_one() == "UTF8"
    finally:
        engine.dispose()


def test_postgres_restart_keeps_rows(tmp_path):
    """Its own cluster: restarting the session's would disturb other tests' pools."""
    if not PostgresServer.is_available():
        pytest.fail("PostgreSQL is not installed: run bash scripts/setup.sh", pytrace=False)
    server = PostgresServer(tmp_path).start()
    try:
        url = server.url
        engine = sa.create_engine(url, pool_pre_ping=True)
        table = sa.Table("t", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True), sa.Column("name", sa.Text))
        table.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": 1, "name": "kept"}])
        server.restart()
        assert server.url == url
        with engine.connect() as conn:
            assert conn.execute(sa.select(table.c.name)).scalar_one() == "kept"
        engine.dispose()
    finally:
        workdir = server.workdir
        server.stop()
    assert not workdir.exists()
    assert server.workdir is None


def test_postgres_databases_are_independent(postgres_server):
    a, b = postgres_server.create_database("indep_a"), postgres_server.create_database("indep_b")
    engines = [sa.create_engine(a), sa.create_engine(b)]
    try:
        with engines[0].begin() as conn:
            conn.execute(sa.text("CREATE TABLE only_in_a (x INTEGER)"))
        assert sa.inspect(engines[0]).get_table_names() == ["only_in_a"]
        assert sa.inspect(engines[1]).get_table_names() == []
    finally:
        for engine in engines:
            engine.dispose()
        postgres_server.drop_database("indep_a")
        postgres_server.drop_database("indep_b")
    with pytest.raises(sa.exc.OperationalError, match="indep_a"):
        sa.create_engine(a).connect()
