"""a run's intake lease: a batch being stored into a run, which delete and publish wait for

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("intake_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("intake_token", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("intake_token")
        batch.drop_column("intake_until")
