"""docs/concepts/idempotency.rst: the Alembic revision that creates ``bailing_idempotency`` by hand."""

import sqlalchemy as sa
from alembic import op

revision = "b41l1ng0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "bailing_idempotency",
        sa.Column("call_key", sa.String(100), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("token", sa.String(32), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("job_id", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text()),
        sa.Column("unsigned_key", sa.Text()),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("expires_at", sa.Float(precision=53), nullable=False),
        sa.Column("status", sa.Integer()),
        sa.Column("headers", sa.Text()),
        sa.Column("body", sa.LargeBinary()),
        sa.Column("note", sa.Text()),
    )
    op.create_index("bailing_idempotency_expires_at", "bailing_idempotency", ["expires_at"])


def downgrade() -> None:
    op.drop_table("bailing_idempotency")
