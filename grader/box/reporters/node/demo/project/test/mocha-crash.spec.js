describe('crash', () => {
  it('first', () => {});
  it('exits', () => { process.exit(0); });
  it('after', () => {});
});
