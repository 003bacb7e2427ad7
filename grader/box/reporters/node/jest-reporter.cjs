'use strict';
// The jest reporter:
//   jest --ci --config '<inline JSON>' --reporters=default --reporters=/abs/jest-reporter.cjs FILES
// Jest loads its reporters in the parent process when it sets up the scheduler, before it
// starts any test (in band or in workers); this module takes the report channel at load, so
// workers forked later inherit neither the variables nor the descriptors. Results arrive per
// test file (onTestResult) from the workers or from the in-band run.
//
// Ids: `<test file>::<describe > ... > it>` (ancestorTitles + title). passed -> passed,
// failed -> failed, pending/skipped/todo/disabled -> skipped. A file that failed to run (it
// threw while loading, its worker died, process.exit in a test) gets a collect error and its
// tests, whatever they were said to be, fail. The end record is written at the parent's exit
// with its exit status.

const { open, uniqueIds, relPath } = require('./channel.cjs');

const { emit } = open();
let collected = 0;
let ended = false;
// The status jest will set: its CLI sets process.exitCode in an 'exit' listener of its own,
// added after the run (after this one), from the results onRunComplete sees here.
let jestCode = null;

process.prependListener('exit', (code) => {
  if (ended) return;
  ended = true;
  let exit = typeof code === 'number' ? code : (process.exitCode || 0);
  if (!exit && jestCode) exit = jestCode;
  emit({ t: 'end', exit, collected });
});

const OUTCOME = { passed: 'passed', failed: 'failed', pending: 'skipped', skipped: 'skipped', todo: 'skipped', disabled: 'skipped', focused: 'passed' };

class GraderJestReporter {
  constructor(globalConfig) {
    this._rootDir = (globalConfig && globalConfig.rootDir) || process.cwd();
    this._failureCode = globalConfig && globalConfig.testFailureExitCode;
    this._files = new Set();
  }

  onTestResult(test, result) {
    this.onTestFileResult(test, result);
  }

  onTestFileResult(test, result) {
    const file = relPath(result.testFilePath || (test && test.path), process.cwd());
    if (this._files.has(file)) return; // jest can call both hooks for one file
    this._files.add(file);
    const broken = !!result.testExecError || !!result.failureMessage && !(result.testResults || []).length;
    if (broken) emit({ t: 'collect', id: file, outcome: 'error' });
    const unique = uniqueIds();
    for (const r of result.testResults || []) {
      const id = unique(file + '::' + [...(r.ancestorTitles || []), r.title].join(' > '));
      let outcome = OUTCOME[r.status] || 'failed';
      if (result.testExecError && outcome === 'passed') outcome = 'failed';
      collected++;
      emit({ t: 'test', id, when: 'call', outcome, d: Math.round((r.duration || 0) * 10) / 1e4 });
    }
  }

  onRunComplete(contexts, results) {
    // as jest-cli's readResultsAndExit decides it (with @jest/core's TestScheduler)
    const r = results || {};
    const failed = !(r.numFailedTests === 0 && r.numRuntimeErrorTestSuites === 0) || !!(r.snapshot && r.snapshot.failure);
    const code = this._failureCode;
    jestCode = failed ? (typeof code === 'number' ? code : 1) : 0;
  }

  getLastError() {
    return undefined;
  }
}

module.exports = GraderJestReporter;
