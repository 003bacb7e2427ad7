"""an index on (task_hash, status, finished_at): intake asks, for every submission, which
image a worker last graded the task in (store/cache.py: current_image), and without it that
question read every submission of the task, patches and all

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-29
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_submissions_task_done", "submissions", ["task_hash", "status", "finished_at"])


def downgrade() -> None:
    op.drop_index("ix_submissions_task_done", table_name="submissions")
