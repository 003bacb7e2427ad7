"""Teams and their API keys. A key is shown once, when it is made; only its SHA-256 is kept."""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import Connection, Row, bindparam, select
from sqlalchemy.orm import Session

from grader.store.models import ApiKey, Team, utcnow

KEY_PREFIX = "grk_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_team(
    session: Session, name: str, *, admin: bool = False, daily_quota: int | None = None, queued_quota: int | None = None
) -> Team:
    team = Team(
        name=name,
        admin=admin,
        daily_quota=daily_quota,
        queued_quota=queued_quota,
        webhook_secret=secrets.token_urlsafe(32),
    )
    session.add(team)
    session.flush()
    return team


def create_key(
    session: Session,
    team_name: str,
    *,
    admin: bool = False,
    daily_quota: int | None = None,
    queued_quota: int | None = None,
) -> str:
    """A new key for `team_name` (the team is created if new; admin and quotas given here update it)."""
    team = session.scalar(select(Team).where(Team.name == team_name))
    if team is None:
        team = create_team(session, team_name, admin=admin, daily_quota=daily_quota, queued_quota=queued_quota)
    else:
        team.admin = team.admin or admin
        team.daily_quota = daily_quota if daily_quota is not None else team.daily_quota
        team.queued_quota = queued_quota if queued_quota is not None else team.queued_quota
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiKey(team_id=team.id, prefix=key[:12], key_hash=hash_key(key)))
    return key


# the team of a key that is not revoked: built once, as every request of the API asks it first
_TEAM_OF_KEY = (
    select(Team.id, Team.name, Team.admin, Team.daily_quota, Team.queued_quota, Team.webhook_secret)
    .join(ApiKey, ApiKey.team_id == Team.id)
    .where(ApiKey.key_hash == bindparam("key_hash"), ApiKey.revoked_at.is_(None))
)


TeamRow = Row[int, str, bool, int | None, int | None, str]  # id, name, admin, daily_quota, queued_quota, webhook_secret


def authenticate(db: Session | Connection, key: str) -> TeamRow | None:
    """The team of a valid key (its id, name, admin, daily_quota, queued_quota and
    webhook_secret, read as a row: no object is made), or None: one statement."""
    return db.execute(_TEAM_OF_KEY, {"key_hash": hash_key(key)}).first()


def revoke_team_keys(session: Session, team_name: str) -> int:
    team = session.scalar(select(Team).where(Team.name == team_name))
    if team is None:
        return 0
    n = 0
    for key in team.keys:
        if key.revoked_at is None:
            key.revoked_at = utcnow()
            n += 1
    return n
