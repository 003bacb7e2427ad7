"""The portal's forms read into what intake and grader/publish.py take: an upload of
predictions (JSONL, a JSON list, or a JSON object keyed by instance_id) or one patch for
one task, with its run, system, trial and metadata; and what a team says of its run. Each
field at fault is named with the reason, and each line of an upload with its own error,
so that the page can show every error at once, beside what caused it; nothing here
stores anything.

An upload's lines are read as the API's batch reads its items (schemas.read_item) and
checked as intake checks them (its task, prompt variant, size), so that the portal
refuses what the API refuses, in the same words."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from grader import intake, names
from grader.handles import Handles
from grader.intake import Refusal
from grader.metrics import REASONING_LEVELS, SPENT, USAGE_FIELDS
from grader.schemas import RunPatch, problems, read_item

SUFFIXES = (".jsonl", ".ndjson", ".json")


@dataclass
class Line:
    """One item of an upload: where it stands in the file, its task, and its error (None: fine)."""

    where: str
    task: str | None
    error: str | None = None
    ignored: list[str] = field(default_factory=list)  # a prediction's fields that are not kept


@dataclass
class Upload:
    """A submit form as read: what it said (to show again), the errors of its fields, its
    lines, and the items for intake (an item refused as read is its Refusal)."""

    said: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    items: list[intake.Item | Refusal] = field(default_factory=list)
    raw: list[Any] = field(default_factory=list)
    run_id: str | None = None

    @property
    def refused(self) -> int:
        return sum(1 for line in self.lines if line.error)


def run_name_of(filename: str) -> str:
    """sb-cli's habit, as `grader submit` has it: a run named after its predictions file."""
    name = filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def records(text: str) -> tuple[list[tuple[str, Any, str | None]], str | None]:
    """The records of a predictions file, each as (where, value, error): a JSON list (item
    1, 2, ...), a JSON object keyed by instance_id, one JSON object, or JSONL (line 1, 2,
    ...; a line that does not parse has its own error and the others are still read). The
    second value is an error of the whole file (empty, or a JSON list that does not parse)."""
    stripped = text.strip()
    if not stripped:
        return [], "the file is empty"
    if stripped[0] in "[{":
        try:
            whole = json.loads(stripped)
        except json.JSONDecodeError as exc:
            if stripped[0] == "[":
                return [], f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            whole = None  # JSONL, most likely: read line by line below
        if isinstance(whole, list):
            return [(f"item {i}", v, None) for i, v in enumerate(whole, 1)], None
        if isinstance(whole, dict):
            keyed = whole and "instance_id" not in whole and "task_id" not in whole
            if keyed and all(isinstance(v, dict) for v in whole.values()):
                return [(f"{k!r}", {"instance_id": k, **v}, None) for k, v in whole.items()], None
            return [("line 1", whole, None)], None
    out: list[tuple[str, Any, str | None]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", json.loads(line), None))
        except json.JSONDecodeError as exc:
            out.append((f"line {n}", None, f"not valid JSON: {exc.msg} (column {exc.colno})"))
    return out, None


def _task_of(value: Any) -> str | None:
    if isinstance(value, dict):
        task = value.get("instance_id") or value.get("task_id")
        return str(task)[:200] if task is not None else None
    return None


def read_submit(svc: Handles, form: Mapping[str, str], upload: tuple[str, bytes] | None) -> Upload:
    """The submit form: `upload` is the predictions file (its name and bytes), if one was
    sent; otherwise one patch for one task (the form's task_id and patch)."""
    said = {
        k: (form.get(k) or "")
        for k in ("kind", "run_id", "system", "trial", "metadata", "task_id", "patch", "phase", *USAGE_FIELDS)
    }
    said["partial"] = "1" if form.get("partial") else ""
    said["overwrite"] = "1" if form.get("overwrite") else ""
    out = Upload(said)
    kind = said["kind"] if said["kind"] in ("predictions", "patch") else "predictions"
    said["kind"] = kind
    defaults: dict[str, Any] = {}
    if said["system"].strip():
        defaults["system"] = said["system"].strip()
    if said["phase"].strip():
        defaults["phase"] = said["phase"].strip()
    level = said["reasoning_level"].strip()
    if level in REASONING_LEVELS:  # for one patch, and the lines of a file that give none
        defaults["reasoning_level"] = level
    elif level:
        out.errors["reasoning_level"] = f"The reasoning level is one of {', '.join(REASONING_LEVELS)}."
    if said["trial"].strip():
        try:
            trial = int(said["trial"])
            if not 0 <= trial <= 1_000_000:
                raise ValueError
            defaults["trial"] = trial
        except ValueError:
            out.errors["trial"] = "The trial is a whole number from 0 to 1,000,000 (0 for a first attempt)."
    if said["metadata"].strip():
        try:
            meta = json.loads(said["metadata"])
        except json.JSONDecodeError as exc:
            out.errors["metadata"] = (
                f"The metadata is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            )
        else:
            if isinstance(meta, dict):
                defaults["metadata"] = meta
            else:
                out.errors["metadata"] = 'The metadata must be a JSON object, like {"model": "x"}.'
    run = said["run_id"].strip()
    if not run and kind == "predictions" and upload is not None:
        run = run_name_of(upload[0])
        said["run_id"] = run
    if run:
        try:
            out.run_id = names.run_name(run)
        except names.NameRefused as exc:
            out.errors["run_id"] = f"This run id cannot be used: {exc}."
    elif kind == "predictions":
        out.errors["run_id"] = "Name the run these predictions belong to (by default, the file's name)."
    if kind == "predictions":
        _read_predictions(svc, out, upload, defaults)
    else:
        _read_patch(svc, out, said, defaults)
    return out


def _read_predictions(svc: Handles, out: Upload, upload: tuple[str, bytes] | None, defaults: dict[str, Any]) -> None:
    if upload is None or not upload[0]:
        out.errors["predictions"] = "Choose a predictions file (JSONL, or JSON) to upload."
        return
    try:
        text = upload[1].decode("utf-8")
    except UnicodeDecodeError as exc:
        out.errors["predictions"] = f"The file is not UTF-8 text (byte {exc.start} cannot be read)."
        return
    found, whole = records(text)
    if whole:
        out.errors["predictions"] = f"The file cannot be read: {whole}."
        return
    limit = svc.settings.max_batch_items
    if len(found) > limit:
        out.errors["predictions"] = f"The file holds {len(found):,} predictions; an upload takes at most {limit:,}."
        return
    for where, value, error in found:
        out.raw.append(value)
        if error is not None:
            out.lines.append(Line(where, None, error))
            out.items.append(Refusal("invalid_fields", error))
            continue
        _add(svc, out, where, value, defaults)


def _read_patch(svc: Handles, out: Upload, said: dict[str, str], defaults: dict[str, Any]) -> None:
    task = said["task_id"].strip()
    if not task:
        out.errors["task_id"] = "Choose the task this patch is for."
        return
    raw: dict[str, Any] = {"task_id": task, "patch": said["patch"].replace("\r\n", "\n")}
    for name in SPENT:  # what the attempt cost: numbers, checked below as the API checks them
        given = said[name].strip()
        if given:
            try:
                raw[name] = int(given) if name.endswith("_tokens") else float(given)
            except ValueError:
                out.errors[name] = f"{given!r} is not a {'whole ' if name.endswith('_tokens') else ''}number."
    if any(name in out.errors for name in SPENT):
        return
    out.raw.append(raw)
    line = _add(svc, out, "the patch", raw, defaults)
    if line.error:  # one patch: its error is the field's
        sub = out.items[-1]
        at = [d["field"] for d in (sub.details or [])] if isinstance(sub, Refusal) else []
        if named := [f for f in at if f in USAGE_FIELDS]:
            out.errors[named[0]] = line.error
        else:
            out.errors["patch" if "patch" in line.error and "task" not in line.error else "task_id"] = line.error
        out.lines.clear()
    elif said["overwrite"] and out.items and isinstance(out.items[-1], intake.Item):
        out.items[-1] = dataclasses.replace(out.items[-1], overwrite=True)


def _add(svc: Handles, out: Upload, where: str, value: Any, defaults: dict[str, Any]) -> Line:
    """One record read into intake's terms and checked as intake checks it."""
    read = read_item(value, out.run_id, defaults)
    sub = read.sub
    if isinstance(sub, intake.Item):
        sub = intake.check(svc, sub) or sub
    line = Line(where, _task_of(value), sub.message if isinstance(sub, Refusal) else None, read.ignored)
    out.lines.append(line)
    out.items.append(sub)
    return line


@dataclass
class RunChange:
    """The run page's publish form as read: what it said, its fields' errors, and the
    fields for publish.change."""

    said: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)


def read_run_change(form: Mapping[str, str]) -> RunChange:
    """Method, description, project and paper URLs (empty: none) and public or private,
    checked by the same model as PATCH /v1/runs/<run>."""
    said = {k: (form.get(k) or "").strip() for k in ("method", "description", "project_url", "paper_url", "public")}
    out = RunChange(said)
    body: dict[str, Any] = {k: said[k] or None for k in ("method", "description", "project_url", "paper_url")}
    if said["public"] not in ("1", "0"):
        out.errors["public"] = "Choose whether the run is public (on the leaderboard) or private to your team."
    else:
        body["public"] = said["public"] == "1"
    try:
        out.fields = RunPatch.model_validate(body).model_dump(exclude_unset=True)
    except ValidationError as exc:
        _, details = problems(exc)
        for d in details:
            name = d["field"].split(".")[0]
            problem = d["problem"]
            if name in ("project_url", "paper_url") and "pattern" in problem:
                problem = "This is not an http or https URL (http://host/... or https://host/...)"
            out.errors.setdefault(name if name in said else "method", f"{problem}.")
    return out
