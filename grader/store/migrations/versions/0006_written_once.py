"""what a read needs of a grade, written with the verdict: the result as each viewer may
see it (masked, `shown`) and the attempt's metric inputs (the localization figures, and
for hosts whether the run was tampered with or flagged by the audit)

The metric inputs of rows graded before are filled in here from their results (pure, no
task needed); `shown` stays empty for them and is computed when they are read, as every
row's was before (grader/serializers/__init__.py: shown_to), since masking needs the task's
secrets, which the migration has no task set to read.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BATCH = 1000


def upgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("shown", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("loc_precision", sa.Float(), nullable=True))
        batch.add_column(sa.Column("loc_recall", sa.Float(), nullable=True))
        batch.add_column(sa.Column("loc_f1", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tampered", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("audit_flagged", sa.Boolean(), nullable=True))
    subs = sa.table(
        "submissions",
        sa.column("id", sa.String()),
        sa.column("result", sa.JSON()),
        sa.column("loc_precision", sa.Float()),
        sa.column("loc_recall", sa.Float()),
        sa.column("loc_f1", sa.Float()),
        sa.column("tampered", sa.Boolean()),
        sa.column("audit_flagged", sa.Boolean()),
    )
    conn = op.get_bind()
    after = ""
    while True:
        rows = conn.execute(
            sa.select(subs.c.id, subs.c.result)
            .where(subs.c.id > after, subs.c.result.is_not(None))
            .order_by(subs.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        for sid, result in rows:
            if result is None:  # a JSON null (SQLAlchemy's JSON stores None so): no grade yet
                continue
            conn.execute(sa.update(subs).where(subs.c.id == sid).values(**inputs(result)))
        after = rows[-1][0]


def inputs(result: Any) -> dict[str, Any]:
    """The metric inputs of a stored result, as grader/store/submissions.py's _done writes them."""
    result = result if isinstance(result, dict) else {}
    loc = result.get("localization") or {}
    return {
        "loc_precision": loc.get("precision"),
        "loc_recall": loc.get("recall"),
        "loc_f1": loc.get("f1"),
        "tampered": bool(result.get("tampered")),
        "audit_flagged": bool(result.get("audit")),
    }


def downgrade() -> None:
    with op.batch_alter_table("submissions") as batch:
        for name in ("audit_flagged", "tampered", "loc_f1", "loc_recall", "loc_precision", "shown"):
            batch.drop_column(name)
