"""The unittest reporter's demo, from the host: runs demo_box.py in each Python environment
image (no network), the reporter's directory (this demo/ inside it) mounted read-only.

    python3 demo/demo.py                     # python-3.9 and python-3.13, the tiny project
    python3 demo/demo.py --env python-3.13   # one environment
    python3 demo/demo.py --django          # also Django's runtests.py --parallel 2

--django builds, once per environment, a throwaway image FROM the environment image with a
pinned Django (its sdist, checked against its sha256, installed with pinned asgiref,
sqlparse and tblib from PyPI: network at build time only) and the sdist's tests/ in
/opt/django/tests; the run itself has no network. The images are tagged
grader/demo-unittest-django-ENV:HASH and can be removed with `docker image rm`.

The grader's own reader of the report channel (read_report of grader/box/channel.py, the
package mounted read-only) reads each report too, so each report is read twice.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPORTER = os.path.dirname(HERE)  # grader/box/reporters/python
BOX = os.path.abspath(os.path.join(REPORTER, "..", ".."))  # grader/box

# A Django that supports the environment's Python, and its dependencies, all pinned.
DJANGO = {
    "python-3.9": {
        "url": "https://files.pythonhosted.org/packages/11/b5/f1a53dc68da6429d6e0345bb848161e2381a2e9f02700148911e8582c2b3/django-4.2.30.tar.gz",
        "sha256": "4ebc7a434e3819db6cf4b399fb5b3f536310a30e8486f08b66886840be84b37c",
        # asgiref needs typing_extensions below Python 3.10
        "deps": ["asgiref==3.8.1", "sqlparse==0.5.3", "tblib==3.0.0", "typing_extensions==4.12.2"],
    },
    "python-3.13": {
        "url": "https://files.pythonhosted.org/packages/02/29/a487a108caa76430c8b616aa90a6d09cf431306112c14093e6f0a7454e17/django-5.2.19.tar.gz",
        "sha256": "ad03d8abc51dbff95ebf34b27123cf0c26a3b62db7ba0cd520783686362533d1",
        "deps": ["asgiref==3.8.1", "sqlparse==0.5.3", "tblib==3.0.0"],
    },
}


def env_image(env: str) -> str:
    out = subprocess.run(
        ["docker", "image", "ls", f"grader/env-{env}", "--format", "{{.Repository}}:{{.Tag}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        raise SystemExit(f"no image grader/env-{env}: build it with `grader env build {env}`")
    return out[0]


def django_image(env: str, base: str) -> str:
    pin = DJANGO[env]
    cache = os.path.join(os.path.expanduser("~/.cache/grader"), "demo")
    os.makedirs(cache, exist_ok=True)
    sdist = os.path.join(cache, pin["url"].rsplit("/", 1)[1])
    if not os.path.exists(sdist) or hashlib.sha256(open(sdist, "rb").read()).hexdigest() != pin["sha256"]:
        with urllib.request.urlopen(pin["url"], timeout=120) as r:
            data = r.read()
        if hashlib.sha256(data).hexdigest() != pin["sha256"]:
            raise SystemExit(f"{pin['url']}: sha256 mismatch")
        with open(sdist, "wb") as f:
            f.write(data)
    name = os.path.basename(sdist)
    top = name[: -len(".tar.gz")]
    dockerfile = f"""FROM {base}
COPY {name} /tmp/{name}
RUN pip install -q --no-deps {" ".join(pin["deps"])} /tmp/{name} \\
 && mkdir -p /opt/django && tar -C /opt/django -xzf /tmp/{name} {top}/tests \\
 && mv /opt/django/{top}/tests /opt/django/tests && rm -rf /opt/django/{top} /tmp/{name}
"""
    tag = "grader/demo-unittest-django-{}:{}".format(
        env, hashlib.sha256((dockerfile + pin["sha256"]).encode()).hexdigest()[:16]
    )
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    with tempfile.TemporaryDirectory() as ctx:
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(dockerfile)
        shutil.copy(sdist, os.path.join(ctx, name))
        print(f"building {tag} (Django from PyPI, once)", flush=True)
        subprocess.run(["docker", "build", "-q", "-t", tag, ctx], check=True, stdout=subprocess.DEVNULL)
    return tag


def run(image: str, args: list[str]) -> int:
    cmd = ["docker", "run", "--rm", "--network", "none", "-v", f"{REPORTER}:/opt/reporter:ro"]
    # the grader's own reader of the report channel (grader/box/channel.py, stdlib only)
    cmd += ["-v", f"{BOX}:/opt/grader-code/box:ro"]
    cmd += [image, "python3", "/opt/reporter/demo/demo_box.py", *args]
    return subprocess.run(cmd).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="environment (default: python-3.9 and python-3.13)")
    parser.add_argument("--django", action="store_true", help="also run Django's runtests.py --parallel 2")
    args = parser.parse_args()
    failed = []
    for env in args.env or ["python-3.9", "python-3.13"]:
        image = env_image(env)
        print(f"\n######## {env}: {image}", flush=True)
        if run(image, []) != 0:
            failed.append(env)
        if args.django:
            print(f"\n######## {env}: Django's runtests.py", flush=True)
            if run(django_image(env, image), ["--django"]) != 0:
                failed.append(f"{env} (Django)")
    print("\ndemo: " + ("every scenario as expected" if not failed else "NOT AS EXPECTED in " + ", ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
