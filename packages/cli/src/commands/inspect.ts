import { once } from 'node:events';
import { startInspector } from '@polish/inspector';
import { parseWholeNumber } from '../numbers.js';
import { natsConnectOptions } from '@polish/agents';
import { readCredentials, type NatsAccessFlags } from '../nats-auth.js';
import { invalidInput, unavailable } from '@polish/protocol';

/** `polish inspect`: serves the inspector page for every run on a NATS until Ctrl-C or SIGTERM. */
export async function inspectCommand(
  flags: NatsAccessFlags & {
    nats?: string;
    port?: string;
    host?: string;
  },
): Promise<number> {
  const natsUrl = flags.nats ?? process.env.NATS_URL;
  if (!natsUrl)
    throw invalidInput('nats', 'required: pass --nats nats://host:4222 or set NATS_URL (the NATS your runs use)');
  const port = parseWholeNumber('port', flags.port, 0, 65535) ?? 4800;
  const credentials = readCredentials(flags);
  const inspector = await startInspector({
    natsUrl,
    port,
    ...(flags.host ? { host: flags.host } : {}),
    auth: natsConnectOptions(natsUrl, credentials?.inspector),
    log: (line) => process.stderr.write(`${line}\n`),
  }).catch((error: Error) => {
    throw unavailable(`cannot start the inspector: ${error.message}`);
  });
  process.stdout.write(`${inspector.url}\n`);
  await Promise.race([once(process, 'SIGINT'), once(process, 'SIGTERM')]);
  await inspector.close();
  return 0;
}
