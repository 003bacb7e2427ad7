require('../nope');
describe('x', () => { it('y', () => {}); });
