"""The static audit's rules for JavaScript and TypeScript on Node.js: the lines of a patch
that reach into the test runner, the report channel or node itself rather than doing the
library's work. A patch's added lines are library code (the tests are protected), so a
finding names what such code has no business doing: opening the inspector, node's
internal bindings, ending the process, writing to descriptors it did not open or through
/proc, patching tape, mocha, jest, node:test or assert (their prototypes, require.cache,
Module._load), redefining globals the runner and its reporter use, loading code by
flags or native addons, and evaluating hidden code. A heuristic that makes the usual
tricks visible, not a proof: the signed reporters, the canaries and the protected paths
are the other layers (docs/runners/node.md).

    SUFFIXES      the file endings these rules read
    RULES         rule name -> patterns over one added line
    PATH_RULES    rule name -> a pattern over a path the patch writes
"""

from __future__ import annotations

import re

SUFFIXES: tuple[str, ...] = (".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")

# a module specifier in require('x'), import('x'), import ... from 'x', export ... from 'x'
_MOD = r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|^\s*import\s+)['"`]"""
_FRAMEWORKS = (
    r"(?:tape|tap|mocha|jest|jest-[\w-]+|@jest/[\w-]+|node:test|test|vitest|@vitest/[\w-]+|expect|chai"
    r"|ava|uvu|jasmine|jasmine-core)"
)

RULES: dict[str, list[re.Pattern[str]]] = {
    # the inspector reads any object of the process, the reporter's key included
    "inspector": [
        re.compile(_MOD + r"(?:node:)?inspector(?:/promises)?['\"`]"),
        re.compile(r"\binspector\s*\.\s*(?:open|url|Session|waitForDebugger|console)\b"),
        re.compile(r"\b_debugProcess\b|\b_debugEnd\b"),
        re.compile(r"\bSIGUSR1\b"),
        re.compile(r"--inspect(?:-brk|-port|-wait|-publish-uid)?\b|--debug-port\b"),
    ],
    # node's internals, below the API the runner's guards cover
    "internal-bindings": [
        re.compile(r"\bprocess\s*\.\s*(?:binding|_linkedBinding|_rawDebug)\b"),
        re.compile(r"\binternalBinding\b|--expose[-_]internals\b|\binternal/(?:test_runner|bootstrap|process)\b"),
        re.compile(
            r"--allow-natives-syntax\b|\bsetFlagsFromString\b|%(?:DebugPrint|GetOptimizationStatus|NeverOptimize)"
        ),
        re.compile(r"\bprocess\s*\.\s*(?:dlopen|reallyExit|_kill|_exiting)\b"),
    ],
    # ending the process (or its test runner) from library code
    "process-exit": [
        re.compile(r"\bprocess\s*\.\s*(?:exit|abort|kill)\s*\("),
        re.compile(r"\bprocess\s*\.\s*exitCode\s*=[^=]"),
        re.compile(
            r"\bprocess\s*\.\s*(?:on|once|addListener|prependListener|prependOnceListener|removeAllListeners"
            r"|removeListener|off)\s*\(\s*['\"`](?:exit|beforeExit|uncaughtException|uncaughtExceptionMonitor"
            r"|unhandledRejection|SIGTERM|SIGINT|SIGHUP)['\"`]"
        ),
        re.compile(r"\bprocess\s*\.\s*removeAllListeners\s*\(\s*\)"),
        re.compile(r"\bprocess\s*\.\s*(?:emit|emitWarning)\s*\(\s*['\"`](?:exit|beforeExit)['\"`]"),
    ],
    # descriptors the code did not open: the report pipe, the key, /proc's views of them
    "descriptors": [
        re.compile(
            r"\bfs(?:\s*\.\s*promises)?\s*\.\s*(?:write\w*|rename\w*|unlink\w*|rm\w*|symlink\w*|link\w*|copyFile\w*"
            r"|chmod\w*|truncate\w*|appendFile\w*|mkdir\w*)\s*\(\s*['\"`][^'\"`]*(?:\btests?/|__tests__|\.test\.|\.spec\.)"
        ),
        re.compile(r"/proc/|/dev/fd\b|/dev/std(?:out|err)\b"),
        re.compile(
            r"\bfs\s*\.\s*(?:write|writeSync|writev|writevSync|close|closeSync|read|readSync|fstat|fstatSync"
            r"|ftruncate|ftruncateSync|fsync|fsyncSync|createWriteStream|createReadStream)\s*\(\s*(?:[3-9]|\d{2,})\s*[,)]"
        ),
        re.compile(r"\{\s*fd\s*:\s*(?:[3-9]|\d{2,})\b"),
        re.compile(r"\bGRADER_(?:REPORT|KEY)_FD\b|\bGRADER_\w+"),
    ],
    # the test framework or assert, reached from library code and bent
    "runner-internals": [
        re.compile(_MOD + _FRAMEWORKS + r"['\"`]"),
        re.compile(r"\b(?:Test|Runner|Runnable|Suite|Hook|Results|TestContext|Context)\s*\.\s*prototype\b"),
        re.compile(r"\brequire\s*\.\s*(?:cache|extensions|main)\b|\bmodule\s*\.\s*(?:parent|children)\b"),
        re.compile(
            r"\bModule\s*\.\s*(?:_load|_resolveFilename|_extensions|_cache|_compile|_findPath|_nodeModulePaths"
            r"|_initPaths|globalPaths|wrap|wrapper|prototype|register|syncBuiltinESMExports)\b"
        ),
        re.compile(r"\bmodule\s*\.\s*constructor\b"),
        re.compile(_MOD + r"(?:node:)?module['\"`]"),
        re.compile(r"\bassert\s*(?:\.\s*\w+)?\s*(?:\.\s*\w+|\[[^\]]+\])\s*=[^=]|\bAssertionError\s*\.\s*prototype\b"),
        re.compile(
            r"\b(?:global|globalThis|window)\s*(?:\.\s*|\[\s*['\"`])(?:it|describe|test|expect|before|after"
            r"|beforeEach|afterEach|beforeAll|afterAll|suite|setup|teardown|jest|__coverage__)\b"
        ),
        re.compile(r"\bSymbol\s*\.\s*for\s*\(\s*['\"`](?:jest|\$\$jest|mocha|tape|node:test|expect|vitest|chai)"),
        re.compile(r"\b__vitest_\w*|\bchai\s*\.\s*(?:Assertion|util|use)\b"),
        re.compile(r"\bTAP version\b|^\s*['\"`]?(?:not )?ok \d+ "),
    ],
    # code that node loads by itself or by flag, and native code
    "loaders": [
        re.compile(r"\bNODE_OPTIONS\b|\bNODE_PATH\b|\bNODE_TEST_CONTEXT\b"),
        re.compile(r"(?<![\w-])(?:--require|--import|--loader|--experimental-loader|--experimental-vm-modules)\b"),
        re.compile(r"\bprocess\s*\.\s*(?:setSourceMapsEnabled|setUncaughtExceptionCaptureCallback)\b"),
        re.compile(_MOD + r"[^'\"`]*\.node['\"`]"),
        re.compile(_MOD + r"(?:ffi-napi|node-ffi|koffi|ref-napi)['\"`]"),
    ],
    # redefining what the runner and its reporter use, for everyone in the process
    "global-tampering": [
        re.compile(
            r"\bObject\s*\.\s*(?:defineProperty|defineProperties|setPrototypeOf|assign|freeze)\s*\(\s*(?:global"
            r"|globalThis|process|console|Object|Function|Array|JSON|Error|Promise|Reflect|Buffer|Symbol|Math"
            r"|String|Number|crypto|require\b)"
        ),
        re.compile(
            r"\b(?:JSON|Reflect|Math|Object|Promise|Symbol)\s*\.\s*\w+\s*=[^=]"
            r"|\b(?:Object|Function|Array|String|Error|Promise|Buffer|RegExp|Map|Set|EventEmitter)\s*\.\s*prototype"
            r"\s*\.\s*\w+\s*=[^=]"
        ),
        re.compile(r"\bError\s*\.\s*(?:prepareStackTrace|captureStackTrace|stackTraceLimit)\s*=[^=]"),
        re.compile(
            r"\bprocess\s*\.\s*(?:stdout|stderr|env|argv|execArgv|emit|on|nextTick|hrtime)\s*(?:\.\s*\w+\s*)?=[^=]"
        ),
        re.compile(r"\bconsole\s*\.\s*\w+\s*=[^=]"),
        re.compile(
            r"\b(?:globalThis|global)\s*\.\s*(?:process|console|setTimeout|setImmediate|queueMicrotask)\s*=[^=]"
        ),
    ],
    # hidden code: evaluated from a string built at run time
    "obfuscation": [
        re.compile(r"\b(?:eval|Function)\s*\(.*\b(?:atob|base64|fromCharCode|Buffer\s*\.\s*from|unescape|decodeURI)"),
        re.compile(r"\bnew\s+Function\s*\(|\bvm\s*\.\s*(?:runIn\w+Context|Script|compileFunction)\b"),
        re.compile(r"\bString\s*\.\s*fromCharCode\s*\((?:\s*\d+\s*,){8,}"),
        re.compile(r"(?:\\x[0-9a-fA-F]{2}){12,}|(?:\\u[0-9a-fA-F]{4}){12,}"),
    ],
}

# rule -> a pattern over a path the patch writes (they are restored or removed anyway: the
# finding says the patch tried)
PATH_RULES: dict[str, re.Pattern[str]] = {
    # a script under a test directory, or a test file: not a Python task's tests/ (its own rules)
    "test-files": re.compile(r"(^|/)(tests?|__tests__|spec)/.*\.[cm]?[jt]sx?$|\.(test|spec)\.[cm]?[jt]sx?$"),
    "installed-packages": re.compile(r"(^|/)node_modules/|(^|/)__mocks__/|(^|/)__snapshots__/"),
    "runner-files": re.compile(
        r"(^|/)(\.mocharc[^/]*|jest\.config[^/]*|vitest\.[^/]*|vite\.config[^/]*|babel\.config[^/]*|\.babelrc[^/]*"
        r"|postcss\.config[^/]*|\.postcssrc[^/]*|tailwind\.config[^/]*|svelte\.config[^/]*"
        r"|\.npmrc|\.nvmrc|\.pnp\.[cm]?js|\.pnp\.loader\.mjs)$"
    ),
    "native-code": re.compile(r"\.(node|so|dylib|dll|wasm)$"),
}
