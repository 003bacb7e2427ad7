// The vitest reporter:
//   vitest run --reporter=/abs/vitest-reporter.mjs --reporter=default --pool=forks ... FILES
// Vitest loads its reporters in its main process, once its configuration is read and
// before any test file is collected; the tests themselves run in child processes of the
// forks pool (never threads of this process: a worker thread shares this process's memory
// and descriptors). This module takes the report channel at load, so the children, forked
// later, inherit neither the variables nor the descriptors.
//
// Ids: `<test file>::<describe > ... > test>` (the file relative to the repository).
// pass -> passed, fail -> failed, skip/todo -> skipped. A test vitest never finished (its
// file did not load, its child process died, a hook of its suite failed) is failed. A file
// with an error of its own (it threw while loading, its process crashed) gets a collect
// error, and its tests, whatever they were said to be, fail; so do the tests of a suite
// whose hook failed. An error vitest could not attribute to a test (an unhandled rejection) is a collect
// error of its file when vitest knows it, else of the run (vitest fails the run for it). The
// end record is written at this process's exit with the status it exits with.
//
// The outcomes are emitted once, from the first of onFinished (vitest 0.x-3.x) and
// onTestRunEnd (vitest 3.x and later), which carry the same tasks.

import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const path = require('path');
const { open, uniqueIds, relPath } = require('./channel.cjs');

const { emit, settings } = open();
const repo = String((settings && settings.repo) || process.cwd());
let collected = 0;
let ended = false;
let reported = false;

process.prependListener('exit', (code) => {
  if (ended) return;
  ended = true;
  const exit = typeof code === 'number' ? code : (process.exitCode || 0);
  emit({ t: 'end', exit, collected });
});

function fileOf(task) {
  const abs = task.filepath ? String(task.filepath) : path.resolve(repo, String(task.name || '?'));
  return relPath(abs, repo);
}

function errors(task) {
  const r = task && task.result;
  return !!(r && Array.isArray(r.errors) && r.errors.length);
}

function outcome(test, broken) {
  const r = test.result;
  const mode = test.mode;
  if (!broken && (mode === 'skip' || mode === 'todo')) return 'skipped';
  const state = r && r.state;
  if (broken) return 'failed';
  if (state === 'pass') return 'passed';
  if (state === 'skip' || state === 'todo') return 'skipped';
  return 'failed'; // fail, or never finished (run, queued, no result)
}

function report(files, unhandled) {
  if (reported) return;
  reported = true;
  const byFile = new Map();
  for (const file of files || []) {
    if (!file) continue;
    const rel = fileOf(file);
    const unique = uniqueIds();
    let broken = errors(file);
    const tests = [];
    const walk = (task, titles, under) => {
      for (const child of task.tasks || []) {
        if (child.type === 'suite') {
          walk(child, [...titles, child.name], under || errors(child));
        } else {
          tests.push([unique(rel + '::' + [...titles, child.name].join(' > ')), child, under]);
        }
      }
    };
    walk(file, [], false);
    byFile.set(rel, { broken, tests });
  }
  for (const err of unhandled || []) {
    const where = err && (err.VITEST_TEST_PATH || (err.meta && err.meta.filepath));
    const rel = where ? relPath(String(where), repo) : null;
    if (rel && byFile.has(rel)) byFile.get(rel).broken = true;
    else emit({ t: 'collect', id: rel || '<unhandled errors>', outcome: 'error' });
  }
  for (const [rel, { broken, tests }] of byFile) {
    if (broken) emit({ t: 'collect', id: rel, outcome: 'error' });
    for (const [id, test, under] of tests) {
      collected++;
      const d = test.result && typeof test.result.duration === 'number' ? test.result.duration : 0;
      emit({ t: 'test', id, when: 'call', outcome: outcome(test, broken || under), d: Math.round(d * 10) / 1e4 });
    }
  }
}

export default class GraderVitestReporter {
  onFinished(files, unhandled) {
    report(files, unhandled);
  }

  onTestRunEnd(modules, unhandled) {
    report((modules || []).map((m) => m && m.task), unhandled);
  }
}
