"""when a run was first published: the lock on further submissions and on deletion

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("published_at", sa.DateTime(timezone=True), nullable=True))
    # a run already on the leaderboard was published no later than it was made
    runs = sa.table(
        "runs",
        sa.column("published_at", sa.DateTime(timezone=True)),
        sa.column("created_at", sa.DateTime(timezone=True)),
        sa.column("public", sa.Boolean),
        sa.column("baseline", sa.Boolean),
    )
    op.execute(
        runs.update()
        .where(sa.or_(runs.c.public.is_(True), runs.c.baseline.is_(True)))
        .values(published_at=runs.c.created_at)
    )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("published_at")
