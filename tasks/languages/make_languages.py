"""Rebuild the language examples: one tiny project per language the grader runs, each
with the same bug (the median of an even-length list is the upper middle value instead
of the mean of the middle pair), its fix, and the test that proves it, graded by that
language's own test runner.

Each project is a repository written here in full: a base commit (the bug, and a test
that passes at it) and a fix branch (the fix, and the test file with the new test). A
task starts at the base; the fix's change outside the tests is the gold patch, the fix's
test file the hidden tests, FAIL_TO_PASS the new test and PASS_TO_PASS the old one, in
the ids of the runner's own convention (docs/tasks.md). Nothing third-party is committed:
every file is written here, and the builds need only what each environment's image holds,
but for TypeScript's vitest, which ts-median-even's install step fetches from the npm
registry at an exact version when its image is built.

Every commit has a fixed author, committer and date, and git runs without system or user
configuration (tasks/examples/repos/make_repos.py's Repo), so the shas are the same on
every run and every machine:

    python3 tasks/languages/make_languages.py            # rewrite repos/*.bundle and the task directories
    python3 tasks/languages/make_languages.py --check    # build again elsewhere; compare with what is here

Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(HERE.parent / "examples" / "repos"))
import make_repos  # noqa: E402  (a sibling suite's script, not a package)
from make_repos import Repo, src  # noqa: E402

SUITE_YAML = """\
# Defaults for every task under this directory (docs/tasks.md, "Suites"); a task's own
# key wins. Written by make_languages.py. A demonstration: submitters see the whole result.
defaults:
  feedback: full
"""

INSTRUCTION = (
    "The median of a list of even length is wrong: it returns the upper of the two middle values. "
    "It must return the mean of the two middle values (odd lengths keep the middle value)."
)


# ----------------------------------------------------------------------------------------------
# Each language: its files at the base, the fix (path -> new text), the test file at the base
# and at the fix, and the task's fields. `old` and `new` are the test ids.
# ----------------------------------------------------------------------------------------------

GO = {
    "go.mod": "module example.com/stats\n\ngo 1.22\n",
    "stats.go": src("""
        // Package stats holds small statistics helpers.
        package stats

        import "sort"

        // Median returns the middle value of xs, which must not be empty.
        func Median(xs []float64) float64 {
        	s := append([]float64(nil), xs...)
        	sort.Float64s(s)
        	return s[len(s)/2]
        }
        """),
}
GO_FIX = {
    "stats.go": src("""
        // Package stats holds small statistics helpers.
        package stats

        import "sort"

        // Median returns the middle value of xs, which must not be empty; for an even
        // number of values, the mean of the middle two.
        func Median(xs []float64) float64 {
        	s := append([]float64(nil), xs...)
        	sort.Float64s(s)
        	n := len(s)
        	if n%2 == 0 {
        		return (s[n/2-1] + s[n/2]) / 2
        	}
        	return s[n/2]
        }
        """),
}
GO_TEST = src("""
    package stats

    import "testing"

    func TestMedianOdd(t *testing.T) {
    	if got := Median([]float64{3, 1, 2}); got != 2 {
    		t.Fatalf("Median([3 1 2]) = %v, want 2", got)
    	}
    }
    """)
GO_TEST_FIX = GO_TEST + src("""

    func TestMedianEven(t *testing.T) {
    	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
    		t.Fatalf("Median([4 1 3 2]) = %v, want 2.5", got)
    	}
    }
    """)

JS = {
    "package.json": src("""
        {
          "name": "stats",
          "version": "1.0.0",
          "private": true,
          "main": "index.js",
          "scripts": {"test": "node --test"}
        }
        """),
    "index.js": src("""
        'use strict';

        /** The middle value of xs, which must not be empty. */
        function median(xs) {
          const s = [...xs].sort((a, b) => a - b);
          return s[Math.floor(s.length / 2)];
        }

        module.exports = { median };
        """),
}
JS_FIX = {
    "index.js": src("""
        'use strict';

        /** The middle value of xs, which must not be empty; for an even number of values,
         *  the mean of the middle two. */
        function median(xs) {
          const s = [...xs].sort((a, b) => a - b);
          const n = s.length;
          return n % 2 === 0 ? (s[n / 2 - 1] + s[n / 2]) / 2 : s[(n - 1) / 2];
        }

        module.exports = { median };
        """),
}
JS_TEST = src("""
    'use strict';
    const { describe, test } = require('node:test');
    const assert = require('node:assert');
    const { median } = require('..');

    describe('median', () => {
      test('an odd-length list gives its middle value', () => {
        assert.strictEqual(median([3, 1, 2]), 2);
      });
    });
    """)
JS_TEST_FIX = JS_TEST.replace(
    "  });\n});\n",
    "  });\n\n  test('an even-length list gives the mean of its middle pair', () => {\n"
    "    assert.strictEqual(median([4, 1, 3, 2]), 2.5);\n  });\n});\n",
)

TS = {
    "package.json": src("""
        {
          "name": "stats",
          "version": "1.0.0",
          "private": true,
          "type": "module",
          "scripts": {"test": "vitest run"},
          "devDependencies": {"vitest": "3.2.4"}
        }
        """),
    "tsconfig.json": src("""
        {
          "compilerOptions": {"strict": true, "module": "ESNext", "moduleResolution": "Bundler", "noEmit": true}
        }
        """),
    "vitest.config.ts": src("""
        import { defineConfig } from 'vitest/config';

        export default defineConfig({ test: { include: ['src/**/*.test.ts'] } });
        """),
    "src/median.ts": src("""
        /** The middle value of xs, which must not be empty. */
        export function median(xs: readonly number[]): number {
          const s = [...xs].sort((a, b) => a - b);
          return s[Math.floor(s.length / 2)];
        }
        """),
}
TS_FIX = {
    "src/median.ts": src("""
        /** The middle value of xs, which must not be empty; for an even number of values,
         *  the mean of the middle two. */
        export function median(xs: readonly number[]): number {
          const s = [...xs].sort((a, b) => a - b);
          const n = s.length;
          return n % 2 === 0 ? (s[n / 2 - 1] + s[n / 2]) / 2 : s[(n - 1) / 2];
        }
        """),
}
TS_TEST = src("""
    import { describe, expect, test } from 'vitest';
    import { median } from './median';

    describe('median', () => {
      test('an odd-length list gives its middle value', () => {
        expect(median([3, 1, 2])).toBe(2);
      });
    });
    """)
TS_TEST_FIX = TS_TEST.replace(
    "  });\n});\n",
    "  });\n\n  test('an even-length list gives the mean of its middle pair', () => {\n"
    "    const xs: number[] = [4, 1, 3, 2];\n    expect(median(xs)).toBe(2.5);\n  });\n});\n",
)
# vitest comes from the npm registry when the task's image is built, at an exact version
TS_INSTALL = "npm install --ignore-scripts --no-audit --no-fund --no-save --no-package-lock vitest@3.2.4"

RUST = {
    "Cargo.toml": '[package]\nname = "stats"\nversion = "0.1.0"\nedition = "2021"\n',
    "Cargo.lock": src("""
        # This file is automatically @generated by Cargo.
        # It is not intended for manual editing.
        version = 3

        [[package]]
        name = "stats"
        version = "0.1.0"
        """),
    "src/lib.rs": src("""
        //! Small statistics helpers.

        /// The middle value of `xs`, which must not be empty.
        pub fn median(xs: &[f64]) -> f64 {
            let mut s = xs.to_vec();
            s.sort_by(|a, b| a.partial_cmp(b).unwrap());
            s[s.len() / 2]
        }
        """),
}
RUST_FIX = {
    "src/lib.rs": src("""
        //! Small statistics helpers.

        /// The middle value of `xs`, which must not be empty; for an even number of
        /// values, the mean of the middle two.
        pub fn median(xs: &[f64]) -> f64 {
            let mut s = xs.to_vec();
            s.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let n = s.len();
            if n % 2 == 0 {
                (s[n / 2 - 1] + s[n / 2]) / 2.0
            } else {
                s[n / 2]
            }
        }
        """),
}
RUST_TEST = src("""
    use stats::median;

    #[test]
    fn odd_length() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }
    """)
RUST_TEST_FIX = RUST_TEST + src("""

    #[test]
    fn even_length() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }
    """)

JAVA = {
    "pom.xml": src("""
        <project xmlns="http://maven.apache.org/POM/4.0.0">
          <modelVersion>4.0.0</modelVersion>
          <groupId>example</groupId>
          <artifactId>stats</artifactId>
          <version>1.0</version>
          <properties>
            <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
          </properties>
        </project>
        """),
    "src/main/java/stats/Stats.java": src("""
        package stats;

        import java.util.Arrays;

        /** Small statistics helpers. */
        public final class Stats {
            private Stats() {}

            /** The middle value of xs, which must not be empty. */
            public static double median(double... xs) {
                double[] s = xs.clone();
                Arrays.sort(s);
                return s[s.length / 2];
            }
        }
        """),
}
JAVA_FIX = {
    "src/main/java/stats/Stats.java": src("""
        package stats;

        import java.util.Arrays;

        /** Small statistics helpers. */
        public final class Stats {
            private Stats() {}

            /** The middle value of xs, which must not be empty; for an even number of values,
             *  the mean of the middle two. */
            public static double median(double... xs) {
                double[] s = xs.clone();
                Arrays.sort(s);
                int n = s.length;
                return n % 2 == 0 ? (s[n / 2 - 1] + s[n / 2]) / 2 : s[n / 2];
            }
        }
        """),
}
JAVA_TEST = src("""
    package stats;

    import static org.junit.jupiter.api.Assertions.assertEquals;

    import org.junit.jupiter.api.Test;

    class MedianTest {
        @Test
        void oddLength() {
            assertEquals(2.0, Stats.median(3, 1, 2));
        }
    }
    """)
JAVA_TEST_FIX = JAVA_TEST.replace(
    "    }\n}\n",
    "    }\n\n    @Test\n    void evenLength() {\n        assertEquals(2.5, Stats.median(4, 1, 3, 2));\n    }\n}\n",
)

C = {
    "CMakeLists.txt": src("""
        cmake_minimum_required(VERSION 3.13)
        project(stats C)
        enable_testing()
        add_library(stats STATIC stats.c)
        target_include_directories(stats PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
        add_subdirectory(tests)
        """),
    "stats.h": "#include <stddef.h>\n\n/* The middle value of xs[0..n), n > 0. */\ndouble stats_median(const double *xs, size_t n);\n",
    "stats.c": src("""
        #include <stdlib.h>
        #include <string.h>

        #include "stats.h"

        static int compare(const void *a, const void *b)
        {
            double x = *(const double *)a, y = *(const double *)b;
            return (x > y) - (x < y);
        }

        double stats_median(const double *xs, size_t n)
        {
            double *s = malloc(n * sizeof *s), m;
            memcpy(s, xs, n * sizeof *s);
            qsort(s, n, sizeof *s, compare);
            m = s[n / 2];
            free(s);
            return m;
        }
        """),
    "tests/test_median_odd.c": src("""
        #include <stdio.h>

        #include "stats.h"

        int main(void)
        {
            double xs[] = {3, 1, 2};
            double m = stats_median(xs, 3);
            if (m != 2) {
                printf("median of 3 1 2 is %g, want 2\\n", m);
                return 1;
            }
            return 0;
        }
        """),
}
C_TESTS_CMAKE = src("""
    foreach(t test_median_odd)
      add_executable(${t} ${t}.c)
      target_link_libraries(${t} stats)
      add_test(NAME ${t} COMMAND ${t})
    endforeach()
    """)
C_FIX = {
    "stats.c": C["stats.c"].replace(
        "    m = s[n / 2];\n", "    m = n % 2 == 0 ? (s[n / 2 - 1] + s[n / 2]) / 2 : s[n / 2];\n"
    ),
    "tests/test_median_even.c": src("""
        #include <stdio.h>

        #include "stats.h"

        int main(void)
        {
            double xs[] = {4, 1, 3, 2};
            double m = stats_median(xs, 4);
            if (m != 2.5) {
                printf("median of 4 1 3 2 is %g, want 2.5\\n", m);
                return 1;
            }
            return 0;
        }
        """),
}
C_TESTS_CMAKE_FIX = C_TESTS_CMAKE.replace("test_median_odd)", "test_median_odd test_median_even)")

PY = {
    "stats/__init__.py": src('''
        """Small statistics helpers."""


        def median(values):
            """The middle value of values, which must not be empty."""
            s = sorted(values)
            return s[len(s) // 2]
        '''),
    "tests/__init__.py": "",
    "conftest.py": "# the repository's root on sys.path, for pytest\n",
}
PY_FIX = {
    "stats/__init__.py": src('''
        """Small statistics helpers."""


        def median(values):
            """The middle value of values, which must not be empty; for an even number of
            values, the mean of the middle two."""
            s = sorted(values)
            n = len(s)
            if n % 2 == 0:
                return (s[n // 2 - 1] + s[n // 2]) / 2
            return s[n // 2]
        '''),
}
PY_UNITTEST = src("""
    import unittest

    from stats import median


    class MedianTest(unittest.TestCase):
        def test_odd_length(self):
            self.assertEqual(median([3, 1, 2]), 2)
    """)
PY_UNITTEST_FIX = PY_UNITTEST + (
    "\n    def test_even_length(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n"
)
PY_PYTEST = src("""
    from stats import median


    def test_odd_length():
        assert median([3, 1, 2]) == 2
    """)
PY_PYTEST_FIX = PY_PYTEST + src("""


    def test_even_length():
        assert median([4, 1, 3, 2]) == 2.5
    """)

LIMITS = {"timeout": 120, "memory": "1g"}

# task id -> the project and the task's fields
LANGUAGES: dict[str, dict] = {
    "go-median-even": dict(
        language="go", environment="go-1.24", base=GO, fix=GO_FIX,
        tests={"stats_test.go": (GO_TEST, GO_TEST_FIX)},
        check={"runner": "go", "fail_to_pass": ["TestMedianEven"], "pass_to_pass": ["TestMedianOdd"]}),
    "js-median-even": dict(
        language="javascript", environment="node-20", base=JS, fix=JS_FIX,
        tests={"test/median.test.js": (JS_TEST, JS_TEST_FIX)},
        check={"runner": "node-test", "paths": ["test/median.test.js"],
               "fail_to_pass": ["test/median.test.js::median > an even-length list gives the mean of its middle pair"],
               "pass_to_pass": ["test/median.test.js::median > an odd-length list gives its middle value"]}),
    "ts-median-even": dict(
        language="typescript", environment="node-20", base=TS, fix=TS_FIX,
        tests={"src/median.test.ts": (TS_TEST, TS_TEST_FIX)},
        install=TS_INSTALL,
        check={"runner": "vitest", "paths": ["src/median.test.ts"],
               "fail_to_pass": ["src/median.test.ts::median > an even-length list gives the mean of its middle pair"],
               "pass_to_pass": ["src/median.test.ts::median > an odd-length list gives its middle value"]}),
    "rust-median-even": dict(
        language="rust", environment="rust-1.85", base=RUST, fix=RUST_FIX,
        tests={"tests/median.rs": (RUST_TEST, RUST_TEST_FIX)},
        install="cargo test --no-run --locked --offline -q",
        check={"runner": "cargo", "fail_to_pass": ["median::even_length"], "pass_to_pass": ["median::odd_length"]}),
    "java-median-even": dict(
        language="java", environment="java-21", base=JAVA, fix=JAVA_FIX,
        tests={"src/test/java/stats/MedianTest.java": (JAVA_TEST, JAVA_TEST_FIX)},
        install="junit-run --prebuild",
        check={"runner": "junit", "paths": ["src/test/java/stats/MedianTest.java"],
               "fail_to_pass": ["stats.MedianTest.evenLength"], "pass_to_pass": ["stats.MedianTest.oddLength"]}),
    "c-median-even": dict(
        language="c", environment="c", base=C, fix=C_FIX,
        tests={"tests/CMakeLists.txt": (C_TESTS_CMAKE, C_TESTS_CMAKE_FIX),
               "tests/test_median_even.c": (None, C_FIX["tests/test_median_even.c"])},
        install="cmake -S . -B build -DBUILD_TESTING=ON && cmake --build build",
        check={"runner": "ctest", "fail_to_pass": ["test_median_even"], "pass_to_pass": ["test_median_odd"]}),
    "py39-median-even": dict(
        language="python", environment="python-3.9", base=PY, fix=PY_FIX,
        tests={"tests/test_median.py": (PY_UNITTEST, PY_UNITTEST_FIX)},
        check={"runner": "unittest", "args": ["tests.test_median"],
               "fail_to_pass": ["test_even_length (tests.test_median.MedianTest)"],
               "pass_to_pass": ["test_odd_length (tests.test_median.MedianTest)"]}),
    "py313-median-even": dict(
        language="python", environment="python-3.13", base=PY, fix=PY_FIX,
        tests={"tests/test_median.py": (PY_PYTEST, PY_PYTEST_FIX)},
        check={"runner": "pytest", "fail_to_pass": ["tests/test_median.py::test_even_length"],
               "pass_to_pass": ["tests/test_median.py::test_odd_length"]}),
}
START = dt.datetime(2024, 2, 1, 9, 0, tzinfo=dt.timezone.utc)


def build_repo(root: Path, spec: dict) -> Repo:
    """The project's repository: the base on main (tag v1.0.0), the fix on fix/median-even."""
    repo = Repo(root, START)
    base = dict(spec["base"])
    for rel, (before, _) in spec["tests"].items():
        if before is not None:
            base[rel] = before
    repo.commit("The first release", base)
    repo.tag("v1.0.0")
    repo.branch("fix/median-even")
    fix: dict[str, str | None] = {rel: after for rel, (_, after) in spec["tests"].items()}
    repo.commit("The median of an even number of values is the mean of the middle pair", {**spec["fix"], **fix})
    repo.checkout("main")
    return repo


def to_yaml(task: dict) -> str:
    """The task file: a small, fixed shape (JSON's quoting is YAML's too)."""
    import json

    lines = []
    for key, value in task.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            for k, v in value.items():
                lines.append(f"  {k}: {json.dumps(v, ensure_ascii=False)}")
        else:
            lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def write_task(out: Path, task_id: str, spec: dict, repo: Repo) -> str:
    d = out / task_id
    shutil.rmtree(d, ignore_errors=True)
    (d / "hidden").mkdir(parents=True)
    base, fix = repo.sha("v1.0.0"), repo.sha("fix/median-even")
    tests = list(spec["tests"])
    gold = repo.git("diff", base, fix, "--", ".", *[f":(exclude){t}" for t in tests])
    (d / "gold.patch").write_text(gold)
    hidden = {}
    for rel in tests:
        (d / "hidden" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "hidden" / rel).write_text(spec["tests"][rel][1])
        hidden[rel] = f"hidden/{rel}"
    task = {
        "id": task_id,
        "instruction": INSTRUCTION,
        "metadata": {"suite": "languages", "language": spec["language"], "difficulty": "easy",
                     "created_at": "2024-02-02", "source": "grader examples"},
        "repo": {"bundle": f"../repos/{task_id}.bundle", "commit": base},
        "environment": spec["environment"],
    }
    if spec.get("install"):
        task["install"] = spec["install"]
    task["check"] = {"type": "tests", "runner": spec["check"]["runner"], "hidden_tests": hidden,
                     **{k: v for k, v in spec["check"].items() if k != "runner"}}
    task["limits"] = LIMITS
    task["gold_patch"] = "gold.patch"
    (d / "task.yaml").write_text(to_yaml(task))
    return f"{task_id:20} {spec['environment']:12} {spec['check']['runner']:10} {base}"


def build(out: Path) -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for task_id, spec in LANGUAGES.items():
            repo = build_repo(Path(tmp) / task_id, spec)
            (out / "repos").mkdir(parents=True, exist_ok=True)
            repo.git("bundle", "create", "-q", str(out / "repos" / f"{task_id}.bundle"), "--all")
            lines.append(write_task(out, task_id, spec, repo))
    (out / "suite.yaml").write_text(SUITE_YAML)
    return lines


def check() -> list[str]:
    """Build elsewhere and compare every file with the ones here."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        cmp = filecmp.dircmp(tmp, HERE, ignore=["make_languages.py", "README.md", "__pycache__"])
        stack = [cmp]
        while stack:
            c = stack.pop()
            problems += [f"missing here: {c.right}/{n}" for n in c.left_only]
            problems += [f"not made by the script: {c.right}/{n}" for n in c.right_only]
            problems += [f"differs: {c.right}/{n}" for n in c.diff_files]
            stack += c.subdirs.values()
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify that what is here is what the script makes")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        print("git is required", file=sys.stderr)
        return 1
    if args.check:
        problems = check()
        for p in problems:
            print("FAIL", p)
        print("ok: a fresh build and the files here agree byte for byte" if not problems else "")
        return 1 if problems else 0
    for line in build(HERE):
        print(line)
    return 0


if __name__ == "__main__":
    assert make_repos.IDENTITY  # the same identity as the examples' repositories
    sys.exit(main())
