'use strict';
// The mocha reporter: `mocha --no-config --no-package --reporter /abs/mocha-reporter.cjs FILES`
// (serial mode; not --parallel, whose workers would be other processes). Mocha requires
// this module while it reads its arguments, before any test file (and, with --no-config and
// --no-package, before any code the repository names in .mocharc* or package.json): it
// takes the report channel at load. Mocha builds the reporter on its runner after loading the
// test files; the spec reporter is kept for people (its output is not read).
//
// Ids: `<test file>::<describe > ... > it>` (Mocha's titlePath). Outcomes: pass -> passed,
// fail -> failed, pending -> skipped; a failing hook fails every test of its suite that had
// not finished; at process exit every test that was loaded and not reported is failed. The
// end record is written from the 'exit' event with the status the process exits with; a
// file that failed to load (mocha never ran) gets a collect error.
//
// Canaries: the settings' `canaries` are this run's canary files, given to mocha with the
// test file (one test file per process, the settings' `unit`); their tests are reported
// under the test file's name (`<test file>::<canary name>`), as if the test file held them.

const fs = require('fs');
const path = require('path');
const Module = require('module');
const { open, snapshot, uniqueIds, relPath } = require('./channel.cjs');

const { emit, settings } = open();
const repo = String((settings && settings.repo) || process.cwd());
const canaryFiles = new Set(Array.isArray(settings && settings.canaries)
  ? settings.canaries.map((c) => path.resolve(repo, String(c))) : []);
const unitFile = settings && typeof settings.unit === 'string' ? settings.unit : null;

// the file a test's id names: a canary's is the test file it runs with
function fileOf(test) {
  const abs = test.file ? path.resolve(String(test.file)) : null;
  if (abs && unitFile && canaryFiles.has(abs)) return unitFile;
  return relPath(test.file);
}
const now = () => Number(process.hrtime.bigint()) / 1e9;

let started = false;
let runnerDone = null; // the runner's failure count once it ended: mocha exits with min(failures, 255)
let finished = false;
let collected = 0;
let check = () => [];
const reported = new Map(); // test object -> id
const known = []; // [test, id] for every test mocha loaded
const ids = new Map();

function mochaModule() {
  try {
    const from = require.main && require.main.filename ? require.main.filename : path.join(process.cwd(), 'x');
    return Module.createRequire(from)('mocha');
  } catch (e) {
    try { return Module.createRequire(path.join(process.cwd(), 'x'))('mocha'); } catch (e2) { return null; }
  }
}

function idOf(test) {
  if (ids.has(test)) return ids.get(test);
  const id = fileOf(test) + '::' + test.titlePath().join(' > ');
  ids.set(test, id);
  return id;
}

function report(test, outcome, d) {
  if (reported.has(test)) return;
  reported.set(test, outcome);
  emit({ t: 'test', id: idOf(test), when: 'call', outcome, d: Math.round((d || 0) * 1e4) / 1e4 });
  for (const what of check()) emit({ t: 'integrity', what: 'mocha: ' + what + ' was replaced while the tests ran' });
}

function eachTest(suite, fn) {
  for (const t of suite.tests || []) fn(t);
  for (const s of suite.suites || []) eachTest(s, fn);
}

const VALUED = new Set(['--reporter', '-R', '--require', '-r', '--config', '--package', '--reporter-option',
  '--reporter-options', '-O', '--ui', '-u', '--timeout', '-t', '--slow', '-s', '--grep', '-g', '--fgrep', '-f',
  '--spec', '--extension', '--file', '--ignore', '--exclude', '--retries', '--jobs', '-j', '--node-option', '-n']);

function finish(code) {
  if (finished) return;
  finished = true;
  for (const [test] of known) if (!reported.has(test)) report(test, test.isPending && test.isPending() ? 'skipped' : 'failed', 0);
  if (!started) {
    // mocha never got to run: the test files (the arguments that are files) did not load
    const args = process.argv.slice(2);
    for (let i = 0; i < args.length; i++) {
      const arg = args[i];
      if (i > 0 && VALUED.has(args[i - 1])) continue;
      if (canaryFiles.has(path.resolve(arg))) continue;
      if (!arg.startsWith('-') && /\.(c|m)?(j|t)sx?$/.test(arg) && fs.existsSync(arg)) {
        emit({ t: 'collect', id: relPath(path.resolve(arg)), outcome: 'error' });
      }
    }
  }
  // mocha sets its exit status in an 'exit' listener of its own, after this one
  let exit = typeof code === 'number' ? code : (process.exitCode || 0);
  if (runnerDone !== null && !exit) exit = Math.min(runnerDone, 255);
  emit({ t: 'end', exit, collected });
}
process.prependListener('exit', finish);

function GraderReporter(runner, options) {
  const Mocha = mochaModule();
  if (Mocha) {
    try { new Mocha.reporters.Spec(runner, options); } catch (e) { /* people's output only */ }
    check = snapshot({
      Runner: Mocha.Runner && Mocha.Runner.prototype,
      Runnable: Mocha.Runnable && Mocha.Runnable.prototype,
      Test: Mocha.Test && Mocha.Test.prototype,
      Suite: Mocha.Suite && Mocha.Suite.prototype,
      Hook: Mocha.Hook && Mocha.Hook.prototype,
    });
  }
  const unique = uniqueIds();
  eachTest(runner.suite, (t) => {
    ids.set(t, unique(fileOf(t) + '::' + t.titlePath().join(' > ')));
    known.push([t]);
  });
  collected = known.length;
  const starts = new Map();
  runner.on('end', () => { runnerDone = runner.failures || 0; });
  runner.on('test', (t) => { starts.set(t, now()); });
  runner.on('pass', (t) => report(t, 'passed', now() - (starts.get(t) || now())));
  runner.on('fail', (t) => {
    if (t.type === 'hook') {
      // a failed hook: the tests of its suite that have not finished do not pass
      const suite = t.parent;
      if (suite) eachTest(suite, (x) => { if (!reported.has(x) && !(x.isPending && x.isPending())) report(x, 'failed', 0); });
      return;
    }
    report(t, 'failed', now() - (starts.get(t) || now()));
  });
  runner.on('pending', (t) => report(t, 'skipped', 0));
  started = true;
}

module.exports = GraderReporter;
