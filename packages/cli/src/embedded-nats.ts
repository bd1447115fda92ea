import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { CredentialsFile } from './nats-auth.js';
import { renderAuthorization } from './nats-server-config.js';
import { writeFileAtomic } from '@polish/orchestrator';
import { unavailable } from '@polish/protocol';

/** A nats-server this process started. */
export interface EmbeddedNats {
  url: string;
  pid: number;
  /** Stops the server and waits for it to exit. */
  stop(): Promise<void>;
}

/** Where the nats-server binary is looked for: `POLISH_NATS_SERVER`, else `nats-server` on PATH. */
export const natsServerBinary = () => process.env.POLISH_NATS_SERVER ?? 'nats-server';

const INSTALL_HINT =
  'install it (Debian/Ubuntu: `apt-get install nats-server`; macOS: `brew install nats-server`; ' +
  'elsewhere a release from https://github.com/nats-io/nats-server/releases), or name the binary in ' +
  'POLISH_NATS_SERVER, or use a running server with --nats nats://host:4222 (or NATS_URL)';

/**
 * Starts a local nats-server with JetStream on a free port of 127.0.0.1 (the server picks
 * it: no race between choosing and binding), storing under `storeDir`.
 */
export function startNatsServer(options: {
  storeDir: string;
  args?: string[];
  /** Receives everything the server logs (with `-V` in args: every message it routes). */
  onLog?: (text: string) => void;
  /** One user per principal with allow-list permissions (see nats-server-config.ts); without, anyone may connect. */
  users?: CredentialsFile;
  /** A configuration file to use as it is (e.g. from `polish nats-config`); port and address are still chosen here. */
  configFile?: string;
}): Promise<EmbeddedNats> {
  mkdirSync(options.storeDir, { recursive: true });
  // Artifacts travel whole in task messages: allow 8 MB (NATS's default is 1 MB) until large
  // artifacts go through the Object Store.
  const config = options.configFile ?? join(options.storeDir, 'polish-nats.conf');
  if (!options.configFile)
    // Replaced whole by a new file of mode 0600 (a restart on the same folder writes it again).
    writeFileAtomic(config, `max_payload: 8MB\n${options.users ? renderAuthorization(options.users) : ''}`, {
      mode: 0o600,
    });
  const binary = natsServerBinary();
  const child = spawn(
    binary,
    [
      '-c',
      config,
      '-a',
      '127.0.0.1',
      '-p',
      '-1',
      '-js',
      ...(options.configFile ? [] : ['-sd', options.storeDir]),
      ...(options.args ?? []),
    ],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      // Its own process group: a terminal's Ctrl-C reaches polish, which stops the server in order.
      detached: true,
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  return new Promise((resolve, reject) => {
    let log = '';
    let url = '';
    child.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        error.code === 'ENOENT'
          ? unavailable(`nats-server is not installed (looked for "${binary}"): ${INSTALL_HINT}`)
          : unavailable(`cannot start nats-server: ${error.message}`),
      );
    });
    child.once('exit', (code) =>
      reject(unavailable(`nats-server exited with code ${code} before it was ready:\n${log.slice(-2000)}`)),
    );
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      options.onLog?.(chunk);
      if (url) return;
      log += chunk;
      const listening = /Listening for client connections on ([0-9.]+):(\d+)/.exec(log);
      if (listening && /Server is ready/.test(log)) {
        // A configuration with a tls block makes the server refuse every client without TLS.
        url = `${/TLS required for client connections/.test(log) ? 'tls' : 'nats'}://${listening[1]}:${listening[2]}`;
        child.stderr?.resume();
        resolve({ url, pid: child.pid ?? -1, stop });
      }
    });
  });
}
