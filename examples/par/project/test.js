// The acceptance check the PAR example's command critique runs: `node test.js`.
const { add } = require('./add.js');
const cases = [
  [2, 3, 5],
  [10, -4, 6],
  [0, 0, 0],
];
let failed = 0;
for (const [a, b, expected] of cases) {
  const got = add(a, b);
  if (got !== expected) {
    failed += 1;
    console.log(`FAIL add(${a}, ${b}) returned ${got}, expected ${expected}`);
  }
}
console.log(failed === 0 ? `ok: ${cases.length} cases pass` : `${failed} of ${cases.length} cases fail`);
process.exit(failed === 0 ? 0 : 1);
