"""what an attempt cost, as its submitter reports it: dollars, input and output tokens,
seconds spent waiting on the model's API and seconds of wall clock, the model's
reasoning level; and whether the attempt was imported as a SWE-bench prediction (a
run of imported single-trial results is legacy: no stability classes, no pass_any@n)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))
        batch.add_column(sa.Column("input_tokens", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("output_tokens", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("api_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("wall_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("reasoning_level", sa.String(16), nullable=True))
        batch.add_column(sa.Column("imported", sa.Boolean(), nullable=True))
    # every run's stored figures lack the new ones: computed again when next read
    op.execute(sa.text("UPDATE runs SET figures_stale = :t").bindparams(t=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        for name in ("imported", "reasoning_level", "wall_seconds", "api_seconds", "output_tokens", "input_tokens"):
            batch.drop_column(name)
        batch.drop_column("cost_usd")
