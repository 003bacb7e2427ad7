"""what the leaderboard shows of a run, stored apart from its whole figures

A run's stored figures hold its per-task table, a few hundred bytes a task: 230 KB for a
run of 2,000 tasks, and a page of 100 such runs read 22 MB to show a line each. The
board's part (the same figures without the per-task table) is a column of its own, filled
here from the stored figures in the database (no run's figures are computed again).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("run_figures") as batch:
        batch.add_column(sa.Column("summary", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "postgresql":
        op.execute("UPDATE run_figures SET summary = (figures::jsonb #- '{metrics,per_task}')::json")
    else:
        op.execute("UPDATE run_figures SET summary = json_remove(figures, '$.metrics.per_task')")


def downgrade() -> None:
    with op.batch_alter_table("run_figures") as batch:
        batch.drop_column("summary")
