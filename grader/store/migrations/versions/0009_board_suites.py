"""one leaderboard table per task set: the suites a run's figures are over, stored with them

The board never ranks runs over different task sets together: its unfiltered view is
one table per set of suites (one suite, mostly), ordered and ranked within it, and this
column is what it groups, orders and counts by. Every run's figures are marked stale, so
that the column is filled when the board is next read.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("board_suites", sa.String(500), nullable=False, server_default=""))
        batch.create_index("ix_runs_board_suites", ["board_suites", "board_complete", "board_resolved", "board_solve"])
    op.execute(sa.text("UPDATE runs SET figures_stale = :t").bindparams(t=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_board_suites")
        batch.drop_column("board_suites")
