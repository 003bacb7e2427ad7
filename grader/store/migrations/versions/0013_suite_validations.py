"""suites' validations: when a whole suite was validated (its empty patches FAIL, its gold
patches PASS, repeatedly), how its tasks came out, and which tasks they were (each one's
definition hash), so that a suite changed since shows as not validated as it is

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "suite_validations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("suite", sa.String(200), nullable=False),
        sa.Column("validated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(200), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("grader_version", sa.String(40), nullable=False),
        sa.Column("tasks", sa.Integer(), nullable=False),
        sa.Column("valid", sa.Integer(), nullable=False),
        sa.Column("invalid", sa.Integer(), nullable=False),
        sa.Column("flaky", sa.Integer(), nullable=False),
        sa.Column("task_set_hash", sa.String(64), nullable=False),
        sa.Column("outcomes", sa.JSON(), nullable=False),
    )
    op.create_index("ix_suite_validations_suite", "suite_validations", ["suite", "id"])


def downgrade() -> None:
    op.drop_index("ix_suite_validations_suite", table_name="suite_validations")
    op.drop_table("suite_validations")
