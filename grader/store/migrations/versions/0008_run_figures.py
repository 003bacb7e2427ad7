"""a run's figures stored with it: the leaderboard pages and the run's page read them

The figures themselves (a few KB of JSON a run) are a table of their own: the board's
scans and sorts read the runs' narrow columns only, never past a run's figures.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        # every run starts stale: its figures are computed when it is first read
        batch.add_column(sa.Column("figures_stale", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("figures_key", sa.String(64), nullable=True))
        batch.add_column(sa.Column("figures_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("board_listed", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("board_complete", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("board_resolved", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("board_solve", sa.Float(), nullable=False, server_default="-1"))
        batch.add_column(sa.Column("board_success", sa.Float(), nullable=False, server_default="-1"))
        batch.add_column(sa.Column("board_attempted", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("board_tasks", sa.Integer(), nullable=False, server_default="0"))
        batch.create_index("ix_runs_board", ["board_complete", "board_resolved", "board_solve"])
    op.create_table(
        "run_figures",
        sa.Column("run_id", sa.String(16), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("figures", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_figures")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_board")
        for name in (
            "board_tasks",
            "board_attempted",
            "board_success",
            "board_solve",
            "board_resolved",
            "board_complete",
            "board_listed",
            "figures_at",
            "figures_key",
            "figures_stale",
        ):
            batch.drop_column(name)
