"""an index on (team_id, status): intake counts a team's queued and running submissions in
every write transaction, and without it that count read every queued row of every team

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_submissions_team_status", "submissions", ["team_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_submissions_team_status", table_name="submissions")
