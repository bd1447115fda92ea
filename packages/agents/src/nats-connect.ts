import { nkeyAuthenticator, type ConnectionOptions } from '@nats-io/transport-node';
import type { NatsAuth } from './worker/worker-config.js';
import { natsOptions } from './nats-options.js';

export { wantsTls, readNkeySeed, checkNatsAuth } from './nats-options.js';

/** {@link natsOptions} with the NATS client's own NKEY authenticator: for the host and the CLI. */
export function natsConnectOptions(url: string, auth: NatsAuth | undefined): Partial<ConnectionOptions> {
  return natsOptions(url, auth, nkeyAuthenticator);
}
