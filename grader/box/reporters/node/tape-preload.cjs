'use strict';
// The tape reporter, a preload: `node -r /abs/tape-preload.cjs test/x.js` (one test file
// per process). It runs in the test process, before the test file: it takes the report
// channel first (channel.cjs), then loads the tape the test file would load (resolved from
// the test file's directory), creates tape's default harness and listens to every test it
// gets, subtests included. tape's own TAP output is left as it is: nobody reads it.
//
// Ids: `<test file>::<test name>`, subtests `<parent> > <child>`. A test passes when it ended
// and every assertion of its own and every one of its subtests passed; a skipped test is
// "skipped"; a todo test is "skipped" too (its failures are expected). At process exit
// (normal end, process.exit(), an uncaught exception) every test that was registered and
// did not finish is reported failed, and the end record carries the exit status the process
// is about to have. A file that threw while it was loading, or whose process ended before
// tape finished (an uncaught exception, process.exit() with tests pending), gets a collect
// error: the runner counts every test of such a file failed, never passed. An exit that
// skips the 'exit' event (process.reallyExit, a signal, a crash of node itself) leaves a
// session with no end: the runner counts that file's tests failed too.
//
// Canaries: the settings' `canaries` (repository paths of this run's canary file) are
// required here, after tape is hooked and before the test file, so their tests run in this
// process with the test file's, under its name (`<test file>::<canary name>`); the grader's
// runner takes their outcomes apart and out of the exit status.

const path = require('path');
const Module = require('module');
const { open, snapshot, uniqueIds, relPath, dropOwnExecArgv } = require('./channel.cjs');

const { emit, settings } = open();
dropOwnExecArgv(false); // a child_process.fork() of the tests does not load this preload again
const now = () => Number(process.hrtime.bigint()) / 1e9;

const mainFile = process.argv[1] ? path.resolve(process.argv[1]) : null;
const file = mainFile ? relPath(mainFile) : '?';
const unique = uniqueIds();

const tests = []; // every test tape told us about, in order
let collected = 0;
let crashed = null;
let finished = false;
let naturalEnd = false; // the event loop ran dry ('beforeExit'): not process.exit() mid-run
let tape = null;
let check = () => [];

function report(rec) {
  if (rec.done) return;
  rec.done = true;
  let outcome;
  if (rec.skip) outcome = 'skipped';
  else if (rec.ended && rec.ok) outcome = rec.todo ? 'skipped' : 'passed';
  else outcome = rec.todo ? 'skipped' : 'failed';
  emit({ t: 'test', id: rec.id, when: 'call', outcome, d: Math.round((now() - (rec.start || now())) * 1e4) / 1e4 });
  for (const what of check()) emit({ t: 'integrity', what: 'tape: ' + what + ' was replaced while the tests ran' });
}

function fail(rec) {
  // a failure counts against the test and every test it is nested in
  for (let r = rec; r; r = r.parent) r.ok = false;
}

function watch(t, parent) {
  const name = String(t.name === undefined ? '(anonymous)' : t.name);
  const full = parent ? parent.fullName + ' > ' + name : name;
  const rec = {
    id: unique(file + '::' + full), fullName: full, parent, ok: true, ended: false,
    skip: !!t._skip, todo: !!t._todo, start: null, done: false,
  };
  tests.push(rec);
  collected++;
  t.once('prerun', () => { rec.start = now(); });
  t.on('result', (res) => {
    if (res && typeof res === 'object' && !res.ok && !res.skip) fail(rec);
  });
  t.on('test', (st) => watch(st, rec));
  t.once('end', () => {
    rec.ended = true;
    // a subtest that never ended fails its parent
    for (const other of tests) if (other.parent === rec && !other.ended && !other.skip) fail(rec);
    report(rec);
  });
}

function finish(code) {
  if (finished) return;
  finished = true;
  let unfinished = false;
  for (const rec of tests) {
    if (!rec.done && !rec.ended && !rec.skip) { fail(rec); unfinished = true; }
  }
  for (const rec of tests) report(rec);
  // the file did not load, or its process ended before tape finished: not a file that ran
  if (crashed || (unfinished && !naturalEnd)) emit({ t: 'collect', id: file, outcome: 'error' });
  const harness = tape && tape.getHarness ? tape.getHarness() : null;
  let exit = typeof code === 'number' ? code : 0;
  if (!exit && harness && harness._exitCode) exit = harness._exitCode;
  if (!exit && (unfinished || crashed)) exit = 1;
  emit({ t: 'end', exit, collected });
}

// Before tape's own exit handler (which ends the process from inside the event).
process.prependListener('exit', finish);
process.on('uncaughtExceptionMonitor', (err) => { crashed = err || true; });
process.on('beforeExit', () => { naturalEnd = true; });

if (mainFile) {
  try {
    tape = Module.createRequire(mainFile)('tape');
  } catch (e) {
    tape = null; // no tape where the test file looks: nothing to listen to, nothing passes
  }
}
if (tape) {
  const harness = tape.getHarness();
  const results = harness._results;
  results.on('_push', (t) => watch(t, null));
  let Results = null;
  try { Results = Object.getPrototypeOf(results); } catch (e) { /* */ }
  check = snapshot({ Test: tape.Test && tape.Test.prototype, Results });
}

// This run's canaries, in this process before the test file (see the top of this file).
if (tape && settings && Array.isArray(settings.canaries)) {
  for (const rel of settings.canaries) {
    try {
      Module.createRequire(mainFile)(path.resolve(String(settings.repo || process.cwd()), String(rel)));
    } catch (e) {
      // a canary file that does not load leaves its tests out: the grader sees them missing
    }
  }
}
