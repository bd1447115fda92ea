// Adds two numbers. (It has a bug: the PAR example's agent fixes it.)
function add(a, b) {
  return a - b;
}
module.exports = { add };
