export { EXIT, exitCodeFor } from "./exit-codes.js";
