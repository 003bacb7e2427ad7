// Code under test that finds the report pipe (any pipe among its descriptors, and the
// reporter's own through /proc/<pid>/fd) and writes a record of its own: it cannot sign it.
const fs = require('fs');
const test = require('tape');
const line = JSON.stringify({ id: 'test/tape-pipe-forge.js::forged', outcome: 'passed', s: '0123456789abcdef', t: 'test', when: 'call' }) + '\t' + '0'.repeat(64) + '\n';
test('writes into the report pipe', (t) => {
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    if (Number(fd) < 3) continue;
    let target = '';
    try { target = fs.readlinkSync('/proc/self/fd/' + fd); } catch (e) { continue; }
    if (target.startsWith('pipe:')) {
      try { fs.writeSync(Number(fd), line); } catch (e) { /* not writable */ }
    }
  }
  t.ok(true);
  t.end();
});
