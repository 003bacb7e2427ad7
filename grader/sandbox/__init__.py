"""Isolated execution of submitted code. See base.py for the interface."""

from grader.sandbox.base import Limits, RunOutput, RunSpec, Sandbox, get_sandbox, sandbox_provider

__all__ = ["Limits", "RunOutput", "RunSpec", "Sandbox", "get_sandbox", "sandbox_provider"]
