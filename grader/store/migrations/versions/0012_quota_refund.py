"""a submission given back to its team's daily quota: cancelled before it was ever graded
when its unpublished run was deleted, on a service that refunds them
(GRADER_QUOTA_REFUND_DELETED); it no longer counts against the day it was sent on

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("quota_refunded_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.drop_column("quota_refunded_at")
