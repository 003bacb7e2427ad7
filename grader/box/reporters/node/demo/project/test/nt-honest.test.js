const { describe, it, test } = require('node:test');
const assert = require('assert');
const { add, sub } = require('../lib');
test('top add', () => assert.strictEqual(add(1, 2), 3));
describe('math', () => {
  it('subtracts', () => assert.strictEqual(sub(3, 1), 2));
  describe('nested', () => {
    it('adds', () => assert.strictEqual(add(2, 2), 4));
    it.skip('skipped', () => {});
  });
});
test('with subtests', async (t) => {
  await t.test('sub ok', () => {});
  await t.test('sub bad', () => assert.strictEqual(sub(1, 1), 0));
});
