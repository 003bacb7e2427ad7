from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grader.verdict import TestOutcomes


@dataclass
class CheckOutcome:
    passed: bool
    explanation: str
    tests: TestOutcomes | None = None
    details: dict[str, Any] = field(default_factory=dict)
