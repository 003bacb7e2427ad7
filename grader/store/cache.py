"""The result cache: an earlier grade that answers for a new submission, under one rule.

The rule: an earlier grade answers only if it is the grade the submission would get, that
is, if everything that decides a verdict is the same: the task's definition
(`task_hash`), the patch (`patch_sha256`), the grader (`grader_version`) and the image the
grade ran in (`image_id`), exactly. The image is part of the key because the task's hash
does not cover it: an environment rebuilt with other package versions (or another base)
is the same task definition in a different image, and can change a verdict. A result
also says which image it ran in (its provenance); an answer from a grade in another
image would name an image the submission was never graded in.

Before this module the two lookups read as two rules: the worker asked for the image it
had just resolved, intake (through the same query, given no image) for whichever image
the task's newest finished row had, intake's own answers from the cache included.

Now both call `lookup` with the full key. The worker knows the image (it resolved it to
grade); intake (the API, which has no Docker by design) asks for `current_image`: the
image a worker last resolved for the task, which is the image the next grade runs in
unless the environment was rebuilt since. Only submissions a worker took count there
(`attempts` > 0), never intake's answers from the cache, which copy an earlier grade's
image: the first grade in a rebuilt image moves intake to it, and until then intake's
answers are what the previous image graded, and say so. (The other way round, the
newest image for both, would have the worker, which holds the image, answer with a grade
from another.)

`lookup` matches on hashes and never loads a patch: a stored patch may be up to
GRADER_MAX_PATCH_BYTES, and intake looks up every item of a batch.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session, defer

from grader.store.models import Status, Submission
from grader.verdict import Verdict


def lookup(s: Session, task_hash: str, patch_sha256: str, grader_version: str, image_id: str) -> Submission | None:
    """The first finished, non-ERROR grade under exactly this key, or None."""
    return s.scalar(
        select(Submission)
        .options(defer(Submission.patch, raiseload=True))
        .where(
            Submission.task_hash == task_hash,
            Submission.patch_sha256 == patch_sha256,
            Submission.status == Status.DONE.value,
            Submission.verdict != Verdict.ERROR.value,
            Submission.grader_version == grader_version,
            Submission.image_id == image_id,
            Submission.result.is_not(None),
        )
        .order_by(Submission.finished_at.asc())
        .limit(1)
    )


_CURRENT_IMAGE = (  # built once: intake asks it for every submission
    select(Submission.image_id)
    .where(
        Submission.task_hash == bindparam("task_hash"),
        Submission.status == Status.DONE.value,
        Submission.image_id.is_not(None),
        Submission.grader_version == bindparam("grader_version"),
        Submission.attempts > 0,  # a worker took it: not an answer at intake
    )
    .order_by(Submission.finished_at.desc())
    .limit(1)
)


def current_image(db: Session | Connection, task_hash: str, grader_version: str) -> str | None:
    """The image a worker last finished a grade of the task in, under this grader version
    (intake's answers from the cache copy an earlier grade's image and do not count), or
    None if none has."""
    image: str | None = db.execute(_CURRENT_IMAGE, {"task_hash": task_hash, "grader_version": grader_version}).scalar()
    return image
