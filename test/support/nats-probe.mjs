// A connection attempt made from inside a network namespace (a test's "other machine"), printed
// as one JSON line. `node nats-probe.mjs plaintext HOST PORT`: a client that never starts TLS
// sends CONNECT and PING, and reports what the server sent back before closing.
// `node nats-probe.mjs nats URL OPTIONS_JSON`: a nats.js client with
// { caFile, certFile, keyFile, seedFile, claim } (claim: an NKEY public key to sign in as, with
// the signature made by seedFile's key) reports "connected" or the error.
import { readFileSync } from 'node:fs';
import { connect as connectSocket } from 'node:net';
import { connect, nkeyAuthenticator } from '@nats-io/transport-node';
import { encode, fromSeed } from '@nats-io/nkeys';

const [mode, ...args] = process.argv.slice(2);
const print = (value) => process.stdout.write(`${JSON.stringify(value)}\n`);

if (mode === 'plaintext') {
  const [host, port] = args;
  const socket = connectSocket(Number(port), host);
  let received = '';
  socket.on('error', () => undefined);
  socket.on('data', (chunk) => {
    const first = received === '';
    received += chunk.toString('latin1');
    if (first) socket.write('CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n');
  });
  socket.once('close', () => print({ received }));
} else {
  const [url, json] = args;
  const { caFile, certFile, keyFile, seedFile, claim } = JSON.parse(json);
  const seed = new TextEncoder().encode(readFileSync(seedFile, 'utf8').trim());
  const signer = fromSeed(seed);
  const authenticator = claim
    ? (nonce) => ({ nkey: claim, sig: encode(signer.sign(new TextEncoder().encode(nonce ?? ''))) })
    : nkeyAuthenticator(seed);
  try {
    const connection = await connect({
      servers: url,
      reconnect: false,
      timeout: 10_000,
      authenticator,
      tls: { caFile, ...(certFile ? { certFile, keyFile } : {}) },
    });
    await connection.flush();
    await connection.close();
    print({ outcome: 'connected' });
  } catch (error) {
    print({ outcome: `${error.message} ${error.cause?.message ?? ''}`.trim() });
  }
}
