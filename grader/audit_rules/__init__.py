"""The static audit's rules per language, one module each, and the two questions
grader/audit.py asks of them for a file a patch writes: which line rules read its added
lines, and which path rules its path trips.

A module defines `SUFFIXES` (the file endings its line rules read) and `RULES` (rule name ->
patterns over one added line), and may define `rules_for(path)` (the line rules for that
path: a test file of the language has its own) and `PATH_RULES` (rule name -> a pattern, or
patterns, over a path the patch writes: what the language's toolchain and runner read by
themselves; they apply to the tasks of that language). Python's rules are grader/audit.py's
own: they read .py files and every file no language here claims.
"""

from __future__ import annotations

import re
from types import ModuleType

from . import c, go, java, node, rust

LANGUAGES: tuple[ModuleType, ...] = (go, node, rust, java, c)


def line_rules(path: str) -> dict[str, list[re.Pattern[str]]]:
    """Rule name -> patterns over an added line of `path`, from every language whose files
    `path` is ({} when none claims it)."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for module in LANGUAGES:
        if hasattr(module, "rules_for"):
            rules: dict[str, list[re.Pattern[str]]] = module.rules_for(path)
        else:
            rules = module.RULES if path.endswith(module.SUFFIXES) else {}
        for rule, patterns in rules.items():
            out.setdefault(rule, []).extend(patterns)
    return out


# a task's language (its metadata, as importers and suites write it) -> the module of its rules
BY_LANGUAGE: dict[str, ModuleType] = {
    "go": go,
    "javascript": node,
    "typescript": node,
    "js": node,
    "ts": node,
    "rust": rust,
    "java": java,
    "kotlin": java,
    "c": c,
    "c++": c,
    "cpp": c,
}


def path_findings(path: str, language: str) -> list[str]:
    """The names of the path rules of the task's language that `path` trips (what that
    language's toolchain and runner read by themselves: a Go module's .c file is cgo's, a C
    project's is its source)."""
    module = BY_LANGUAGE.get(language.strip().lower())
    names: list[str] = []
    for rule, patterns in getattr(module, "PATH_RULES", {}).items():
        listed = patterns if isinstance(patterns, list) else [patterns]
        if any(p.search(path) for p in listed) and rule not in names:
            names.append(rule)
    return names
