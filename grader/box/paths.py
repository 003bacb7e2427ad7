"""Where things are inside a grading container: defined once, read by both halves (the
host's image builder and pipeline, and the supervisor in the container)."""

GRADER_DIR = "/opt/grader"  # root-only in the instance image
RUN_DIR = f"{GRADER_DIR}/run"  # what the host copies in for one run (root-only)
ARCHIVE = f"{RUN_DIR}/box.zip"  # this package, shipped as one archive
PACKAGE = "grader_box"  # this package's name inside the archive
ORDER_PATH = f"{RUN_DIR}/order.json"  # the run's order (order.Order)
PATCH_PATH = f"{RUN_DIR}/submission.patch"
STAGE_DIR = f"{RUN_DIR}/base"  # root-only: the protected files as they were before the patch
HIDDEN_DIR = f"{GRADER_DIR}/task/hidden"  # the hidden tests: manifest.json and files/
REPO_DIR = "/work/repo"  # the repository, owned by UID
UID = 1000  # the unprivileged user every submitted process runs as
# Bytecode is read only from this root-owned cache of the environment's own modules (the
# environment image fills it); the repository's sources are always compiled afresh.
PYCACHE = "/opt/pycache"
