"""where a run's results came from: "graded" here as its team sent them (a predictions
upload included) or "imported" from elsewhere, which alone is legacy now; a run made
before keeps no origin and the legacy rule of its day (every attempt a SWE-bench
prediction line, one trial)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("origin", sa.String(16), nullable=True))
    # every run's stored figures lack single_trial, and a run of one trial now shows no
    # pass_any@n or stability classes: computed again when next read
    op.execute(sa.text("UPDATE runs SET figures_stale = :t").bindparams(t=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("origin")
