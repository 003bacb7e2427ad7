"""The Docker providers, and the only package that imports the Docker SDK: engine.py
(images, builds, imports of base images) and runs.py (one hardened container per
grading run, under runc as "docker" or under gVisor's runsc as "gvisor") and pool.py
(long-lived containers, each run sandboxed inside one by namespaces, as "pool")."""

from grader.sandbox.docker.containers import LABEL, OWNER_LABEL, SUPERVISOR_CAPS, DockerSandbox, GVisorSandbox
from grader.sandbox.docker.engine import API_TIMEOUT, DockerEngine

__all__ = ["API_TIMEOUT", "LABEL", "OWNER_LABEL", "SUPERVISOR_CAPS", "DockerEngine", "DockerSandbox", "GVisorSandbox"]
