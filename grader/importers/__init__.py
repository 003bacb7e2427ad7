"""Importers for existing benchmarks: SWE-bench instances, RES-Q rows and GitGoodBench
merge-conflict samples become task directories (docs/importers.md).

    import_file("swebench", "instances.jsonl", settings=..., suite="swe-lite", env_map=...)

reads the rows, converts each (swebench.py, resq.py, gitgoodbench.py), then writes,
checks and validates the suite (suite.py): a task whose empty patch does not FAIL or
whose gold patch does not PASS is reported and left out unless `keep_invalid`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from grader.config import Settings
from grader.importers import gitgoodbench, resq, swebench
from grader.importers.common import GITHUB_URL, Context, DatasetError, Repositories, read_rows
from grader.importers.suite import ImportReport, Outcome, Progress, write_suite
from grader.tasks.model import Task

if TYPE_CHECKING:
    from grader.pipeline import Grader
    from grader.validate import DerivedLists, TaskValidation

__all__ = ["SOURCES", "DatasetError", "ImportReport", "Outcome", "import_file", "import_rows"]

Source = Literal["swebench", "resq", "gitgoodbench"]
SOURCES: dict[str, dict[str, str]] = {
    "swebench": {"id_key": "instance_id", "suite": "swebench", "label": "SWE-bench"},
    "resq": {"id_key": "id", "suite": "resq", "label": "RES-Q"},
    "gitgoodbench": {"id_key": "id", "suite": "gitgoodbench", "label": "GitGoodBench"},
}
MAX_LISTED = 20


def import_file(source: Source, path: Path, **kwargs: Any) -> ImportReport:
    """Import the rows of a JSON list or JSONL file; see `import_rows`."""
    return import_rows(source, read_rows(Path(path)), source_name=str(path), **kwargs)


def import_rows(
    source: Source,
    rows: list[dict[str, Any]],
    *,
    settings: Settings,
    suite: str | None = None,
    out: Path | None = None,
    repo_dir: Path | None = None,
    repo_source: Literal["bundle", "url"] = "bundle",
    env_map: Path | str | dict[str, dict[str, Any]] | None = None,
    only: Iterable[str] = (),
    timeout: float | None = None,
    validate: bool = True,
    keep_invalid: bool = False,
    skip_broken: bool = False,
    repeat: int = 1,
    derive_lists: int = 0,
    grader: Grader | None = None,
    runtime: str | None = None,
    url_template: str = GITHUB_URL,
    progress: Progress | None = None,
    source_name: str = "<rows>",
) -> ImportReport:
    """Convert `rows` from `source` and write the suite to `out` (default: the tasks
    directory's `<suite>/`). A row that cannot be converted (a missing field, no
    environment) fails the whole import, naming every such row, unless `skip_broken`.
    With `validate`, every task is graded with the empty and the gold patch `repeat`
    times (Docker; `grader` may be given, else one is made with `runtime`). With
    `derive_lists` N, a SWE-bench row that carries neither FAIL_TO_PASS nor PASS_TO_PASS
    gets both by running its tests N times at the base and with the gold patch, a test
    that does not hold in every run left out (grader.validate.derive_lists); it then
    validates like any other."""
    if source not in SOURCES:
        raise DatasetError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    spec = SOURCES[source]
    suite = suite or spec["suite"]
    only = [str(i) for i in only]
    if only:
        present = {str(r.get(spec["id_key"])) for r in rows}
        missing = [i for i in only if i not in present]
        if missing:
            raise DatasetError(f"{source_name}: no row with {spec['id_key']} {', '.join(missing)}")
        rows = [r for r in rows if str(r.get(spec["id_key"])) in only]
    out = Path(out) if out else settings.tasks_dir / suite
    ctx = Context(
        suite=suite,
        repos=Repositories(repo_dir, settings.cache_dir, url_template),
        environments_dir=Path(settings.environments_dir),
        cache_dir=Path(settings.cache_dir),
        timeout=timeout,
        derive_lists=derive_lists > 0,
    )
    if progress:
        progress(f"converting {len(rows)} {spec['label']} row(s)")
    if source == "swebench":
        mapping = swebench.load_env_map(env_map) if isinstance(env_map, (str, Path)) else env_map
        drafts, failed = swebench.convert(rows, ctx, env_map=mapping)
    elif source == "resq":
        drafts, failed = resq.convert(rows, ctx)
    else:
        drafts, failed = gitgoodbench.convert(rows, ctx)
    if failed and not skip_broken:
        lines = [f"  {why}" if sid in why else f"  {sid}: {why}" for sid, why in failed[:MAX_LISTED]]
        if len(failed) > MAX_LISTED:
            lines.append(f"  ... and {len(failed) - MAX_LISTED} more")
        raise DatasetError(
            f"{source_name}: {len(failed)} of {len(rows)} row(s) cannot be imported "
            f"(nothing was written; --skip-broken imports the others):\n" + "\n".join(lines)
        )

    validator: Callable[[Task], TaskValidation] | None = None
    deriver: Callable[[Task], DerivedLists] | None = None
    own_grader = used = False
    if validate and drafts:
        from grader.pipeline import Grader  # Docker only when validating
        from grader.validate import derive_lists as derive
        from grader.validate import validate_task

        if grader is None:
            grader, own_grader = Grader(settings, runtime=runtime), True
        validating = grader

        def validate_one(task: Task) -> TaskValidation:
            nonlocal used
            used = True
            return validate_task(validating, task, repeat)

        def derive_one(task: Task) -> DerivedLists:
            nonlocal used
            used = True
            return derive(validating, task, derive_lists)

        validator = validate_one
        deriver = derive_one if derive_lists > 0 else None
    try:
        return write_suite(
            drafts,
            source=spec["label"],
            suite=suite,
            out=out,
            repos=ctx.repos,
            cache_dir=ctx.cache_dir,
            tasks_dir=settings.tasks_dir,
            repo_source=repo_source,
            validator=validator,
            deriver=deriver,
            keep_invalid=keep_invalid,
            not_converted=failed,
            progress=progress,
        )
    finally:
        if own_grader and used and grader is not None:
            grader.sandbox.close()  # the warm containers validation started
