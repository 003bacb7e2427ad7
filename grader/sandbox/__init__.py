"""Isolated execution of submitted code. See base.py for the interface.

Providers by name: "docker" (Docker with runc), "gvisor" (Docker with gVisor's runsc)
and "fake" (scripted outputs and no engine, for tests: fake.py). Each built-in
provider's module is imported on first use, so naming the interface does not load the
Docker SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

from grader.errors import GraderError
from grader.sandbox.base import ContainerOutput, ContainerSpec, Limits, Sandbox, registered, sandbox_provider

# The module that registers each built-in provider.
BUILTIN = {
    "docker": "grader.sandbox.docker",
    "gvisor": "grader.sandbox.docker",
    "fake": "grader.sandbox.fake",
    "pool": "grader.sandbox.docker.pool",
}
# settings.runtime (GRADER_RUNTIME, --runtime) names an OCI runtime; each known one is a provider.
RUNTIME_PROVIDERS = {"runc": "docker", "runsc": "gvisor", "pool": "pool"}


def provider_names() -> list[str]:
    """Every provider that can be asked for: the built-in ones and any registered since."""
    return sorted(set(BUILTIN) | set(registered()))


def get_sandbox(name: str = "docker", **kwargs: Any) -> Sandbox:
    """A new sandbox of provider `name`, made with `kwargs`. Raises GraderError for a name
    no provider has."""
    if name not in registered() and name in BUILTIN:
        importlib.import_module(BUILTIN[name])
    try:
        factory = registered()[name]
    except KeyError:
        raise GraderError(f"unknown sandbox provider {name!r}; known: {provider_names()}") from None
    return factory(**kwargs)


def sandbox_for_runtime(runtime: str, **kwargs: Any) -> Sandbox:
    """The sandbox for an OCI runtime as the settings name it: runc is "docker", runsc is
    "gvisor"; another name is a runtime registered with the Docker engine, run by the
    "docker" provider (which refuses it at the first run when the engine has no such runtime)."""
    provider = RUNTIME_PROVIDERS.get(runtime)
    if provider is None:
        return get_sandbox("docker", runtime=runtime, **kwargs)
    return get_sandbox(provider, **kwargs)


__all__ = [
    "BUILTIN",
    "RUNTIME_PROVIDERS",
    "Limits",
    "ContainerOutput",
    "ContainerSpec",
    "Sandbox",
    "get_sandbox",
    "provider_names",
    "sandbox_for_runtime",
    "sandbox_provider",
]
