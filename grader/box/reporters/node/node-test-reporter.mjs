// The node --test reporter:
//   node --test --test-reporter=/abs/node-test-reporter.mjs --test-reporter-destination=stdout \
//        [--test-reporter=spec --test-reporter-destination=stderr] FILES
// It runs in the parent runner process, which loads reporters before it spawns one child
// process per test file (and which runs no test code itself); the children report to the
// parent on their stdout (node's v8-serializer framing) and this module turns the parent's
// event stream into signed records. See README.md for what a child can forge on that pipe.
//
// Ids: `<test file>::<describe > ... > test>` (names joined by " > ", nested t.test()
// subtests included). Suites (describe) are not tests. pass -> passed, fail -> failed,
// skip/todo -> skipped. A test file whose process failed without reporting any test of its
// own (it threw while loading, or crashed) gets a collect error; tests it never reported are
// simply absent (and so not passed). The end record is written at the parent's exit with
// its exit status.
//
// Canaries (in process only): the settings' `canaries` are this run's canary files, which
// node-test-preload.mjs imports into the test file's process; their tests are reported under
// the test file's name (`<test file>::<canary name>`), as if the test file held them.
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const { open, uniqueIds, relPath } = require('./channel.cjs');

const { emit, settings } = open();
let collected = 0;
const perFile = new Map(); // file -> { stack: [names], unique, reported: count }

function state(file) {
  let s = perFile.get(file);
  if (!s) {
    s = { stack: [], unique: uniqueIds(), reported: 0, seen: new Set() };
    perFile.set(file, s);
  }
  return s;
}

// In process (node-test-preload.mjs): the test file is this process's main module.
const inProcess = !process.execArgv.includes('--test') && !!process.argv[1];
const repo = String((settings && settings.repo) || process.cwd());
const canaryFiles = new Set(
  inProcess && settings && Array.isArray(settings.canaries) ? settings.canaries.map((c) => path.resolve(repo, String(c))) : []);
const mainFile = inProcess ? relPath(path.resolve(process.argv[1])) : null;
// the canary files this process must import (the preload does), as file: URLs
export const canaries = [...canaryFiles].map((f) => pathToFileURL(f).href);
let ended = false;
process.on('exit', (code) => {
  if (ended) return;
  ended = true;
  const exit = typeof code === 'number' ? code : (process.exitCode || 0);
  if (inProcess && !collected && exit !== 0) emit({ t: 'collect', id: relPath(process.argv[1]), outcome: 'error' });
  emit({ t: 'end', exit, collected });
});

// node's harness calls the reporter once; in process, the preload waits for that call before
// the test file loads, so a later call (test code that imported this module) gets nothing.
let calls = 0;
let markCalled;
export const called = new Promise((resolve) => { markCalled = resolve; });

export default async function* graderReporter(source) {
  if (calls++) {
    emit({ t: 'integrity', what: 'node-test: the reporter was called again, from outside the test runner' });
    return;
  }
  markCalled();
  for await (const event of source) {
    const data = event.data || {};
    let file = data.file ? relPath(data.file) : null;
    const isFileTest = data.nesting === 0 && data.file && data.name === data.file;
    if (file && canaryFiles.has(path.resolve(repo, file))) file = mainFile;
    if (event.type === 'test:start' && file && !isFileTest) {
      const s = state(file);
      s.stack.length = data.nesting;
      s.stack[data.nesting] = String(data.name);
    } else if ((event.type === 'test:pass' || event.type === 'test:fail') && file) {
      const details = data.details || {};
      if (isFileTest) {
        // the file's own process: a failure with no test of its own reported is a file
        // that did not load (or died before its first result)
        if (event.type === 'test:fail' && !state(file).reported) emit({ t: 'collect', id: file, outcome: 'error' });
        continue;
      }
      if (details.type === 'suite') continue;
      const s = state(file);
      const names = s.stack.slice(0, data.nesting);
      names.push(String(data.name));
      const id = s.unique(file + '::' + names.join(' > '));
      let outcome = event.type === 'test:pass' ? 'passed' : 'failed';
      if (data.skip !== undefined && data.skip !== false) outcome = 'skipped';
      else if (data.todo !== undefined && data.todo !== false) outcome = 'skipped';
      s.reported++;
      collected++;
      emit({ t: 'test', id, when: 'call', outcome, d: Math.round((details.duration_ms || 0) * 10) / 1e4 });
    }
  }
}
