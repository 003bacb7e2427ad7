const { add, sub } = require('../lib');
describe('math', () => {
  test('adds', () => expect(add(1, 2)).toBe(3));
  test('subtracts', () => expect(sub(3, 1)).toBe(2));
  test.skip('skipped', () => {});
  describe('nested', () => { test('adds again', () => expect(add(2, 2)).toBe(4)); });
});
