"""A static audit of a patch: where it reaches into the test runner or the interpreter.

Code under test has no business touching pytest's internals, walking the garbage
collector's objects, climbing frames, installing import hooks, ending its own process
at import, writing to descriptors it did not open or shipping packaging metadata and
bytecode. An honest patch may still do one of these (a CLI calls os._exit, a library
registers an import hook), so findings are recorded on the result (`audit`) and a host
setting (GRADER_AUDIT) chooses whether they only flag the grade or fail it.

It reads the lines the patch adds and the paths it writes, never the repository: a
heuristic that makes the usual tricks visible, not a proof (obfuscated code can pass it;
the canaries and the signed report are the other layers).
"""

from __future__ import annotations

import re

from unidiff.patch import PatchSet

from grader.patch import decode
from grader.verdict import AuditFinding

# rule -> patterns over one added line. Every rule names what the line reaches for.
LINE_RULES: dict[str, list[re.Pattern[str]]] = {
    "runner-internals": [
        re.compile(r"\b_pytest\b"),
        re.compile(r"\bpluggy\b"),
        re.compile(
            r"\bpytest_(runtest|collect|collection|session|configure|unconfigure|report|terminal|make|pyfunc"
            r"|itemcollected|load_initial|addoption|cmdline|plugin|fixture_|assertrepr|warning|exception"
            r"|keyboard|internalerror|enter_pdb|ignore_collect|pycollect|generate_tests|deselected)\w*"
        ),
        re.compile(r"\bpytest_plugins\b"),
        re.compile(r"\b(TestReport|CollectReport|CallInfo|TerminalReporter|LogXML)\b"),
        re.compile(r"\bhookimpl\b|\bhookwrapper\b|\bpluginmanager\b"),
        re.compile(r"\bunittest\.(TestResult|TextTestResult|result)\b|\b_TextTestResult\b"),
    ],
    "object-walk": [
        re.compile(r"\bgc\s*\.\s*get_(objects|referrers|referents)\b"),
        re.compile(r"\bfrom\s+gc\s+import\b"),
    ],
    "frame-tricks": [
        re.compile(r"\bsys\s*\.\s*_getframe\b|\bsys\._current_frames\b"),
        re.compile(r"\binspect\s*\.\s*(currentframe|stack|getouterframes|getframeinfo)\b"),
        re.compile(r"\.(f_back|f_globals|f_locals|f_builtins|tb_frame|gi_frame|cr_frame)\b"),
        re.compile(r"\b(sys|threading)\s*\.\s*set(trace|profile)\b|\bsys\.monitoring\b"),
    ],
    "import-hooks": [
        re.compile(r"\bsys\s*\.\s*(meta_path|path_hooks|path_importer_cache)\b"),
        re.compile(r"\bimportlib\s*\.\s*(machinery|abc|util\.spec_from)\b"),
        # a module name that is not one plain literal: computed to hide what it imports
        re.compile(r"\b(__import__|import_module)\s*\((?!\s*(['\"])[\w.]*\2\s*[,)])"),
        re.compile(r"\b(builtins|__builtins__)\s*(\.|\[)\s*['\"]?\w+['\"]?\s*\]?\s*=[^=]"),
        re.compile(r"\bsys\s*\.\s*modules\s*\[[^\]]*\]\s*=[^=]"),
    ],
    "process-exit": [
        re.compile(r"\bos\s*\.\s*(_exit|abort|kill|killpg)\b"),
        re.compile(r"\bsignal\s*\.\s*(signal|alarm|setitimer|pthread_kill)\b"),
        re.compile(r"\batexit\s*\.\s*register\b"),
    ],
    "descriptors": [
        re.compile(r"/proc/"),
        re.compile(r"/dev/fd\b"),
        re.compile(r"\bos\s*\.\s*(write|dup|dup2|fdopen|closerange|close)\s*\(\s*\d"),
        re.compile(r"\bos\s*\.\s*(dup2|closerange|set_inheritable)\b"),
    ],
    "native-code": [re.compile(r"\bctypes\b|\bcffi\b|\b_ctypes\b")],
    "bytecode": [
        re.compile(r"\bmarshal\s*\.\s*loads?\b"),
        re.compile(r"\b(types\s*\.\s*)?CodeType\s*\("),
        re.compile(r"\.__code__\s*=[^=]"),
    ],
    "packaging-metadata": [re.compile(r"\bentry_points\b.*\bpytest11\b|\bpytest11\b")],
    "obfuscation": [
        re.compile(
            r"\b(exec|eval|compile)\s*\(.*\b(b64decode|b32decode|b85decode|a85decode|decompress"
            r"|fromhex|unhexlify|codecs\s*\.\s*decode|rot13|rot_13)"
        ),
        re.compile(r"\bgetattr\s*\([^,]+,\s*(['\"])[^'\"]*\1\s*\+"),
    ],
}
# rule -> patterns over a path the patch writes
PATH_RULES: dict[str, re.Pattern[str]] = {
    "packaging-metadata": re.compile(r"(\.dist-info|\.egg-info)(/|$)|\.pth$|\.egg-link$|(^|/)__editable__"),
    "runner-files": re.compile(r"(^|/)(conftest\.py|sitecustomize\.py|usercustomize\.py|pytest\.ini|\.pytest\.ini)$"),
    "bytecode": re.compile(r"\.py[co]$|(^|/)__pycache__/"),
    "native-code": re.compile(r"\.(so|pyd|dylib|dll)(\.\d+)*$"),
}
MAX_FINDINGS = 50


def audit_patch(raw: bytes) -> list[AuditFinding]:
    """The findings for a (vetted) patch, at most MAX_FINDINGS, in patch order."""
    text = decode(raw).replace("\r\n", "\n")
    if not text.strip():
        return []
    try:
        patch = PatchSet(text)
    except Exception:  # noqa: BLE001 - an unparseable patch was refused before this; nothing to audit
        return []
    findings: list[AuditFinding] = []
    for f in patch:
        path = f.target_file or ""
        path = path[2:] if path.startswith(("a/", "b/")) else path
        if f.is_removed_file:
            continue
        for rule, pattern in PATH_RULES.items():
            if pattern.search(path):
                findings.append(AuditFinding(rule=rule, path=path))
        if f.is_binary_file:
            findings.append(
                AuditFinding(rule="binary-file", path=path, text="a binary file: its contents are not audited")
            )
        for hunk in f:
            for line in hunk:
                if not line.is_added:
                    continue
                value = line.value.rstrip("\n")
                for rule, patterns in LINE_RULES.items():
                    if any(p.search(value) for p in patterns):
                        findings.append(
                            AuditFinding(rule=rule, path=path, line=line.target_line_no, text=value.strip()[:160])
                        )
                        break
        if len(findings) >= MAX_FINDINGS:
            return findings[:MAX_FINDINGS]
    return findings
