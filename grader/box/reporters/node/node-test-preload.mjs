// node:test files run in process, one file per process, with no child protocol to forge:
//   node --import /abs/node-test-preload.mjs \
//        --test-reporter=/abs/node-test-reporter.mjs --test-reporter-destination=stdout \
//        [--test-reporter=spec --test-reporter-destination=stderr] test/x.test.js
// (no --test). This preload runs before the test file: importing the reporter opens the
// report channel; a no-op root-level before() hook makes node:test set up its reporters now;
// the preload then waits until node's harness has called the reporter (node waits for
// --import modules before it loads the main module), so the test file can neither take the
// channel nor be the reporter's first caller. Then it imports this run's canary files (the
// settings' `canaries`), so their tests run in this process before the test file's.
import { createRequire } from 'node:module';
import { called, canaries } from './node-test-reporter.mjs';
import { before } from 'node:test';

const { dropOwnExecArgv } = createRequire(import.meta.url)('./channel.cjs');

before(() => {});
let timer;
await Promise.race([called, new Promise((resolve) => { timer = setTimeout(resolve, 10000); })]);
clearTimeout(timer);
// node read its reporter flags already; a child_process.fork() of the tests gets none of them
dropOwnExecArgv(true);
for (const url of canaries) {
  try {
    await import(url);
  } catch (e) {
    // a canary file that does not load leaves its tests out: the grader sees them missing
  }
}
