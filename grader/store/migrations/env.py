"""Alembic environment: the connection is always handed in by `Database.migrate()`."""

from alembic import context

from grader.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True, compare_type=True)
with context.begin_transaction():
    context.run_migrations()
