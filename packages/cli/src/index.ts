// @polish/cli: the `polish` command; its building blocks are exported for tests and embedding.
export { EXIT, exitCodeFor } from './exit-codes.js';
export { startNatsServer, natsServerBinary, type EmbeddedNats } from './embedded-nats.js';
export { openRuntime, defaultStateDir, type Runtime, type RuntimeOptions } from './runtime.js';
export { DEFAULT_PRICES } from './default-prices.js';
export { generatePasswords, type CredentialsFile } from './nats-auth.js';
