"""What the Node guard's look after each unit costs, inside a grading container: a full walk
of the repository's names (`node_guard.scan`, every look at 4cb6ff5) against a look that
keeps what it saw and lists again only the directories whose stamp moved
(`node_guard.Scanner`), on the same tree in the same container, in turns.

The container is the node-20 environment's, as a Node grade's, as the submission's user.
The tree is made in the container's /tmp (its own filesystem, as the repository is):
`--dirs` directories of `--files` files each, under a few levels, like a JavaScript
project's sources and tests without node_modules/. Each round runs one walk and one kept
look; between rounds one file is written into one directory (what a unit of tests does),
so the kept look lists that one again (and those changed within its margin, a second),
and every fifth round a package.json and a node_modules/ are made in a directory the last
look kept; in the fourth, the targets outside the tree of two links named node_modules and
package.json change: both looks must find the same, or the run fails. It prints the medians, the
ratio, and how many directories a kept look listed again.

    .venv/bin/python benchmarks/guard_look.py                     # runc and runsc
    .venv/bin/python benchmarks/guard_look.py --dirs 600 --files 10 --runtimes runsc
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

INSIDE = r"""
import json, os, statistics, sys, time
sys.path.insert(0, "/opt/guard")
from grader.box.runners import node_guard as ng
dirs, files, rounds = map(int, sys.argv[1:4])
repo = "/tmp/repo"
def place(d):
    return os.path.join(repo, "pkg%d" % (d % 7), "mod%d" % (d % 31), "d%d" % d)
for d in range(dirs):
    path = place(d)
    os.makedirs(path)
    for f in range(files):
        open(os.path.join(path, "f%d.js" % f), "w").close()
open(os.path.join(repo, "package.json"), "w").close()
# links a patch may add, dangling or pointing at a directory: what they count as follows
# their targets outside the repository, which round 3 changes
# (in the last two directories, which no round writes into)
last, before_last = place(dirs - 1), place(dirs - 2)
os.symlink("/tmp/evil", os.path.join(last, "node_modules"))
os.makedirs("/tmp/pj")
os.symlink("/tmp/pj", os.path.join(before_last, "package.json"))
pattern = ({"package.json", ".babelrc"}, ("jest.config.",), (".babelrc.js",))
scanner = ng.Scanner(repo, pattern)
scanner.look()
time.sleep(1.1)  # past the scanner's margin: the tree's stamps are settled
walk, kept, listed = [], [], []
for i in range(rounds):
    d = place(i)
    if i == 3:  # the links' targets: a directory of packages, a file where a directory was
        os.makedirs("/tmp/evil/chai")
        os.rmdir("/tmp/pj")
        open("/tmp/pj", "w").close()
    if i % 5 == 4:  # now and then what the guard is for: a package.json, a node_modules/
        os.makedirs(os.path.join(d, "node_modules", "chai"))
        open(os.path.join(d, "package.json"), "w").close()
    else:
        open(os.path.join(d, "unit%d.tmp" % i), "w").close()
    t = time.perf_counter()
    a = ng.scan(repo, *pattern)
    walk.append(time.perf_counter() - t)
    before = scanner.listed
    t = time.perf_counter()
    b = scanner.look()
    kept.append(time.perf_counter() - t)
    listed.append(scanner.listed - before)
    assert a == b, "the kept look found otherwise than the walk"
n_dirs = sum(1 for _ in os.walk(repo))
print(json.dumps({"walk": statistics.median(walk), "kept": statistics.median(kept),
                  "dirs": n_dirs, "listed": statistics.median(listed)}))
"""


def image() -> str:
    """The node-20 environment's image as this checkout makes it (built if missing)."""
    sys.path.insert(0, str(ROOT))
    from grader.config import get_settings
    from grader.images import Images

    return Images(get_settings()).build_env("node-20", log=print)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirs", type=int, default=300)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=15, help="at most --dirs less 2")
    ap.add_argument("--runtimes", default="runc,runsc")
    args = ap.parse_args()
    if args.rounds > args.dirs - 2:
        sys.exit("--rounds must be at most --dirs less 2: the last two directories hold the links")
    tag = image()
    print(f"{args.dirs} directories of {args.files} files, {args.rounds} rounds, image {tag[:19]}")
    for runtime in args.runtimes.split(","):
        argv = ["docker", "run", "--rm", "--network=none", f"--runtime={runtime}", "--user", "1000:1000"]
        argv += ["-v", f"{ROOT / 'grader' / 'box'}:/opt/guard/grader/box:ro", "--entrypoint", "python3", tag]
        argv += [
            "-c",
            "import sys; sys.modules['grader'] = type(sys)('grader'); sys.modules['grader'].__path__ = "
            "['/opt/guard/grader']\n" + INSIDE,
            str(args.dirs),
            str(args.files),
            str(args.rounds),
        ]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{runtime}: {done.stderr.strip()[-2000:]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{runtime:6s} {r['dirs']} directories: walk {r['walk'] * 1000:.1f} ms, kept look "
            f"{r['kept'] * 1000:.1f} ms ({r['listed']:.0f} listed again); the walk takes {r['walk'] / r['kept']:.1f}x "
            "the kept look's time"
        )


if __name__ == "__main__":
    main()
