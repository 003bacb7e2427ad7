# The grader service: `grader serve` (the API) and `grader worker` (grading jobs).
#
# BASE defaults to the offline base made by `grader images bootstrap bookworm`
# (build here with scripts/build-service-image.sh). With a registry, any Debian
# image with python3 (3.11 or later) and its venv module works, e.g.
#   docker build --build-arg BASE=python:3.11-slim-bookworm .
# git is installed with apt when the base lacks it (python:slim does).
ARG BASE=grader/base:bookworm
FROM ${BASE}

ENV LANG=C.UTF-8 \
    PATH=/opt/grader/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    GRADER_TASKS_DIR=/srv/grader/tasks \
    GRADER_ENVIRONMENTS_DIR=/srv/grader/environments \
    GRADER_CACHE_DIR=/var/cache/grader

# The user and git: nothing here depends on the project's files.
RUN set -eu; \
    if ! command -v git >/dev/null; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >/dev/null; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    groupadd --gid 10001 grader; \
    useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin grader; \
    install -d -o grader -g grader /var/cache/grader /srv/grader

# Dependencies, from pyproject.toml alone, so that a code change reuses this layer.
# grader-ca.crt is optional (the glob matches nothing when it is absent; pyproject.toml
# keeps the COPY valid): the CA bundle of a TLS-intercepting proxy. It is added to the
# system store rather than pointed at, so the file itself can go: pip, git and the
# worker's own image builds (GRADER_CA_BUNDLE defaults to the system bundle) trust it.
COPY pyproject.toml grader-ca.cr[t] /src/
RUN set -eu; \
    if [ -s /src/grader-ca.crt ]; then \
        install -m 644 /src/grader-ca.crt /usr/local/share/ca-certificates/grader-ca.crt; \
        update-ca-certificates >/dev/null 2>&1; \
        export PIP_CERT=/etc/ssl/certs/ca-certificates.crt; \
    fi; \
    rm -f /src/grader-ca.crt; \
    python3 -m venv /opt/grader; \
    python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["server"]))' \
        > /tmp/requirements.txt; \
    pip install -q "setuptools>=70" -r /tmp/requirements.txt; \
    rm /tmp/requirements.txt

# Example tasks and environments, then the code: installed without dependencies and
# without build isolation (setuptools is already in the venv), so no index is needed.
COPY environments/ /srv/grader/environments/
COPY tasks/ /srv/grader/tasks/
COPY README.md /src/
COPY grader/ /src/grader/
RUN set -eu; \
    pip install -q --no-deps --no-build-isolation /src; \
    rm -rf /src; \
    grader --version

USER grader
WORKDIR /srv/grader
EXPOSE 8000
ENTRYPOINT ["grader"]
CMD ["serve", "--bind", "0.0.0.0:8000"]
