const assert = require('assert');
const { add, sub } = require('../lib');
describe('math', () => {
  it('adds', () => assert.strictEqual(add(1, 2), 3));
  it('subtracts', () => assert.strictEqual(sub(3, 1), 2));
  describe('nested', () => {
    it('adds again', () => assert.strictEqual(add(2, 2), 4));
    it.skip('skipped', () => {});
  });
});
describe('broken hook', () => {
  before(() => { throw new Error('hook fails'); });
  it('never runs', () => {});
});
