// A test that forks node (child_process.fork passes process.execArgv on): the child must
// not load the reporter again (it would find no channel and die).
const cp = require('child_process');
const path = require('path');
const test = require('tape');
test('a forked child runs', (t) => {
  const child = cp.fork(path.join(__dirname, 'fork-child.js'), { stdio: 'inherit' });
  child.on('exit', (code) => { t.equal(code, 0); t.end(); });
});
