from grader.patch import inspect_patch, path_problem, touched_files

MIB = 1024 * 1024
GOOD = b"""diff --git a/pkg/mod.py b/pkg/mod.py
index 1111111..2222222 100644
--- a/pkg/mod.py
+++ b/pkg/mod.py
@@ -1,2 +1,2 @@
 def f():
-    return 1
+    return 2
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1 @@
+x = 1
diff --git a/old.txt b/renamed.txt
similarity index 100%
rename from old.txt
rename to renamed.txt
"""


def test_good_patch_lists_files_and_hash():
    info = inspect_patch(GOOD, MIB)
    assert info.ok and not info.empty
    assert {(f.path, f.status) for f in info.files} == {
        ("pkg/mod.py", "modified"),
        ("pkg/new.py", "added"),
        ("renamed.txt", "renamed"),
    }
    assert info.touched() == {"pkg/mod.py", "pkg/new.py", "renamed.txt", "old.txt"}
    assert len(info.sha256) == 64 and info.size == len(GOOD)


def test_empty_patch_is_legal():
    for raw in (b"", b"\n  \n"):
        info = inspect_patch(raw, MIB)
        assert info.ok and info.empty and info.touched() == set()


def test_size_limit():
    info = inspect_patch(b"x" * 11, 10)
    assert not info.ok and "limit is 10 bytes" in info.problems[0]


def test_not_a_diff():
    assert "not a unified diff" in inspect_patch(b"hello world\n", MIB).problems[0]


def test_truncated_hunk_is_malformed():
    raw = b"--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n"
    assert "malformed" in inspect_patch(raw, MIB).problems[0]


def test_path_rules():
    assert path_problem("src/a.py") is None
    assert path_problem("/dev/null") is None
    assert "absolute" in path_problem("/etc/passwd")
    assert "'..'" in path_problem("a/../../etc")
    assert ".git" in path_problem(".git/hooks/pre-commit")
    assert ".git" in path_problem("sub/.git/config")
    assert path_problem(".github/workflows/x.yml") is None
    assert path_problem(".gitignore") is None
    assert "backslash" in path_problem("a\\b")


def test_traversal_hidden_in_git_headers_is_caught():
    raw = b"""diff --git a/ok.txt b/ok.txt
similarity index 100%
rename from ok.txt
rename to ../../outside.txt
"""
    info = inspect_patch(raw, MIB)
    assert not info.ok and any("'..'" in p for p in info.problems)


def test_git_dir_target_refused():
    raw = b"--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n"
    assert any(".git" in p for p in inspect_patch(raw, MIB).problems)


def test_crlf_patch_parses():
    raw = GOOD.replace(b"\n", b"\r\n")
    assert inspect_patch(raw, MIB).ok


def test_binary_patch_is_accepted_and_marked():
    raw = b"""diff --git a/img.png b/img.png
new file mode 100644
index 0000000..1111111
GIT binary patch
literal 3
KcmZ?wbN~PV00IC2

literal 0
HcmV?d00001

"""
    info = inspect_patch(raw, MIB)
    assert info.ok, info.problems
    assert info.files[0].binary and info.files[0].path == "img.png"


def test_nul_bytes_outside_a_binary_patch_are_refused():
    assert "NUL" in inspect_patch(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\0\n+a\n", MIB).problems[0]


def test_touched_files_of_bad_patch_is_empty():
    assert touched_files(b"nonsense") == set()
    assert touched_files(GOOD) == {"pkg/mod.py", "pkg/new.py", "renamed.txt", "old.txt"}


def test_paths_too_deep_or_too_long_are_refused():
    deep = "/".join(["d"] * 70) + "/x.py"
    long = "a" * 1100 + ".py"
    for name in (deep, long):
        raw = f"--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n".encode()
        assert "refused" in inspect_patch(raw, MIB).problems[0]
    ok = "/".join(["d"] * 20) + "/x.py"
    assert inspect_patch(f"--- /dev/null\n+++ b/{ok}\n@@ -0,0 +1 @@\n+x\n".encode(), MIB).ok
