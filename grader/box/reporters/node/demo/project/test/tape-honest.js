const test = require('tape');
const { add, sub } = require('../lib');
test('add', (t) => { t.equal(add(1, 2), 3); t.end(); });
test('sub', (t) => { t.equal(sub(3, 1), 2, 'sub subtracts'); t.end(); });
test('nested', (t) => {
  t.test('inner ok', (st) => { st.ok(true); st.end(); });
  t.test('inner bad', (st) => { st.equal(sub(1, 1), 0); st.end(); });
  t.end();
});
test('skipped', { skip: true }, (t) => { t.fail('never'); t.end(); });
test('add', (t) => { t.equal(add(2, 2), 4, 'same name twice'); t.end(); });
