"""Settings: documented defaults, then `GRADER_*` environment variables, then explicit
arguments. This is the only module that reads the environment for the grader's own
settings (the Docker SDK still honours DOCKER_HOST on its own)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def _default_ca_bundle() -> Path | None:
    return SYSTEM_CA_BUNDLE if SYSTEM_CA_BUNDLE.is_file() else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GRADER_", extra="ignore")

    tasks_dir: Path = Field(Path("tasks"), description="where task YAML files are found (searched recursively)")
    environments_dir: Path = Field(Path("environments"), description="one sub-directory per environment, each with a Dockerfile")
    cache_dir: Path = Field(Path.home() / ".cache" / "grader", description="prepared task checkouts and build contexts")
    runtime: str = Field("runc", description="the OCI runtime for grading containers: runc, or runsc for gVisor")
    max_patch_bytes: int = Field(1024 * 1024, description="larger patches are PATCH FAILED without being looked at")
    output_limit_bytes: int = Field(64 * 1024, description="test output kept in a result (head and tail)")
    report_limit_bytes: int = Field(8 * 1024 * 1024, description="largest JUnit report read back from a run")
    ca_bundle: Path | None = Field(
        default_factory=_default_ca_bundle,
        description="PEM bundle given to image builds (pip behind a TLS-intercepting proxy); empty to give none",
    )
    debian_mirror: str | None = Field(None, description="mirror for `images bootstrap`; default: read from apt's sources")
    tmpfs_size: str = Field("256m", description="size of the writable /tmp inside grading containers")
    storage_size: str = Field("2G", description="writable-layer cap, applied where the storage driver supports it")
    file_size_limit: int = Field(256 * 1024 * 1024, description="RLIMIT_FSIZE for processes in grading containers")
    prewarm: int = Field(4, description="run shapes (task and limits) kept started ahead of demand; 0 turns it off")
    build_missing_images: bool = Field(True, description="build a task's instance image on demand when it is missing")


@lru_cache(maxsize=1)
def _from_env() -> Settings:
    return Settings()


def get_settings(**overrides) -> Settings:
    """The effective settings: defaults <- GRADER_* environment <- `overrides` (None values ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return _from_env()
    return _from_env().model_copy(update=given)
