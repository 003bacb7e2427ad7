const cp = require('child_process');
const path = require('path');
const assert = require('assert');
const { test } = require('node:test');
test('a forked child runs', async () => {
  const child = cp.fork(path.join(__dirname, 'fork-child.js'), { stdio: 'inherit' });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.strictEqual(code, 0);
});
