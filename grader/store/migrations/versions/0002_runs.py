"""runs

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import datetime
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("method", sa.String(length=200), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("project_url", sa.String(length=500), nullable=True),
        sa.Column("paper_url", sa.String(length=500), nullable=True),
        sa.Column("public", sa.Boolean(), nullable=False),
        sa.Column("baseline", sa.Boolean(), nullable=False),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("team_id", "name", name="uq_runs_team_name"),
    )
    # runs that already have submissions get their row
    conn = op.get_bind()
    pairs = conn.execute(sa.text("SELECT DISTINCT team_id, run_id FROM submissions WHERE run_id IS NOT NULL")).all()
    runs = sa.table(
        "runs",
        sa.column("id"),
        sa.column("team_id"),
        sa.column("name"),
        sa.column("public"),
        sa.column("baseline"),
        sa.column("hidden"),
        sa.column("verified"),
        sa.column("created_at"),
    )
    now = datetime.datetime.now(datetime.UTC)
    if pairs:
        op.bulk_insert(
            runs,
            [
                {
                    "id": secrets.token_hex(8),
                    "team_id": t,
                    "name": n,
                    "public": False,
                    "baseline": False,
                    "hidden": False,
                    "verified": False,
                    "created_at": now,
                }
                for t, n in pairs
            ],
        )


def downgrade() -> None:
    op.drop_table("runs")
