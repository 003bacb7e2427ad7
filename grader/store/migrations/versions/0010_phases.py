"""challenge phases: a suite offered in a window, with per-team limits, a board of its own
and an optional private split; runs and submissions say which phase they belong to, and a
run asking to be public in a phase its host reviews first says since when

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "phases",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("slug", sa.String(100), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("daily_limit", sa.Integer(), nullable=True),
        sa.Column("total_limit", sa.Integer(), nullable=True),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("reveal", sa.Boolean(), nullable=False),
        sa.Column("auto_publish", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("phase_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_runs_phase_id", "phases", ["phase_id"], ["id"])
        batch.create_index("ix_runs_phase_id", ["phase_id"])
        batch.add_column(sa.Column("review_requested_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("phase_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_submissions_phase_id", "phases", ["phase_id"], ["id"])
        batch.create_index("ix_submissions_phase", ["phase_id", "team_id", "queued_at"])


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_index("ix_submissions_phase")
        batch.drop_constraint("fk_submissions_phase_id", type_="foreignkey")
        batch.drop_column("phase_id")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("review_requested_at")
        batch.drop_index("ix_runs_phase_id")
        batch.drop_constraint("fk_runs_phase_id", type_="foreignkey")
        batch.drop_column("phase_id")
    op.drop_table("phases")
