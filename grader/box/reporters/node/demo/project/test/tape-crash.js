const test = require('tape');
test('before the crash', (t) => { t.ok(true); t.end(); });
test('crashes', (t) => { setTimeout(() => { throw new Error('boom'); }, 1); });
test('after the crash', (t) => { t.ok(true); t.end(); });
